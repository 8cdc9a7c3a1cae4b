"""The model and data that `kuiper demo` runs: a digits CNN made by tools/make_demo_model.py."""
