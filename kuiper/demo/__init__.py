"""The model and data that `kuiper demo` runs: a digits CNN made by tools/make_demo_model.py.

``MODEL`` is a small model that ships with kuiper, for first programs and examples:

    import kuiper, kuiper.demo
    model = kuiper.load(kuiper.demo.MODEL)      # input "0": (batch, 1, 8, 8) float32, output: 10 logits

``DATA`` is a .npz of 360 held-out digits: ``images`` (360, 1, 8, 8) float32, ``labels``
(360,) and ``torch_logits`` (360, 10), PyTorch's outputs for the same images.
"""

from pathlib import Path

MODEL = Path(__file__).with_name("digits.pnnx.param")
DATA = Path(__file__).with_name("digits_heldout.npz")
