"""Batch inference over a Dask cluster (``pip install "kuiper[dask]"``).

    import kuiper.dask
    logits = kuiper.dask.predict("resnet18.pnnx.param", images)        # a lazy dask array
    summary = kuiper.dask.map_files("resnet18.pnnx.param", paths, "out/")

Each worker process loads the model once, from its path (weights never travel through
the scheduler), and reuses it for every chunk.  Dask itself is imported only when a
function here runs, so ``kuiper`` works without the extra.
"""

from __future__ import annotations

from .cluster import connect, local_cluster
from .files import FilesSummary, ItemResult, map_files
from .model_cache import ModelSpec, load_counts, resolve_model
from .predict import predict

__all__ = ["FilesSummary", "ItemResult", "ModelSpec", "connect", "load_counts", "local_cluster", "map_files",
           "predict", "resolve_model"]
