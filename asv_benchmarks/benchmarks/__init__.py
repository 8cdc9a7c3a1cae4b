"""asv benchmarks for kuiper; see docs/performance.md for how to run them."""
