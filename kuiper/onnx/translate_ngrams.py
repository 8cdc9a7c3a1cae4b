"""ONNX TfIdfVectorizer on integer tokens -> comparisons, sums and one MatMul of the canonical op set.

Each row of tokens (X is [C] or [B, C]) is scanned for the pool's n-grams: for every skip distance
d = 1 .. max_skip_count + 1, the items at p, p + d, ..., p + (n - 1) d form an n-gram (n from
min_gram_length to max_gram_length; 1-grams once, with d = 1, as ONNX counts them). The pool is known
at load, so for each n and d the windows of the row are compared with every pool n-gram at once:
windows (B, P, 1, n) against the pool (E, n), a match where all n items agree, summed over the P
positions. A matrix of ones sends each pool entry's count to its output column (``ngram_indexes``);
``mode`` then weighs them (TF: the count, IDF: the weight where the count is positive, TFIDF: their
product; without weights, a weight of 1). A pool of strings is refused, as string tensors are.
"""

from __future__ import annotations

import numpy as np

from ..model_ir import OpNode
from .emit import Emit
from .site import Site


def _pool(site: Site, low: int, high: int) -> dict[int, list[tuple[tuple[int, ...], int]]]:
    """n -> the pool's n-grams of that length (low <= n <= high) and their output column."""
    if site.attribute("pool_strings") is not None:
        raise site.error("pool_strings (n-grams of strings) are not supported: kuiper's tensors hold numbers")
    pool, starts = site.ints("pool_int64s"), site.ints("ngram_counts")
    columns = site.ints("ngram_indexes")
    grams: dict[int, list[tuple[tuple[int, ...], int]]] = {}
    entry = 0
    for n, start in enumerate(starts, start=1):
        end = starts[n] if n < len(starts) else len(pool)
        if end < start or (end - start) % n:
            raise site.error(f"ngram_counts {starts} do not cut pool_int64s ({len(pool)} items) into n-grams")
        for offset in range(start, end, n):
            if entry >= len(columns):
                raise site.error(f"ngram_indexes has {len(columns)} entries, fewer than the pool's n-grams")
            if low <= n <= high:
                grams.setdefault(n, []).append((tuple(pool[offset:offset + n]), columns[entry]))
            entry += 1
    return grams


def translate_tf_idf_vectorizer(site: Site) -> list[OpNode]:
    low, high = site.int_("min_gram_length"), site.int_("max_gram_length")
    skips, mode = site.int_("max_skip_count"), site.string("mode")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise site.error(f"mode must be TF, IDF or TFIDF, found {mode!r}")
    if not 1 <= low <= high or skips < 0:
        raise site.error(f"needs 1 <= min_gram_length ({low}) <= max_gram_length ({high}) and max_skip_count "
                         f"({skips}) >= 0")
    shape = site.static_shape(0)
    if len(shape) not in (1, 2):
        raise site.error(f"X must be [C] or [B, C], found {list(shape)}")
    columns = site.ints("ngram_indexes")
    width = max(columns) + 1 if columns else 0
    weights = site.floats("weights", [])
    if weights and len(weights) < width:
        raise site.error(f"weights has {len(weights)} entries for {width} output columns")
    emit = Emit(site)
    rows = emit.convert(site.input(0), "int64")
    if len(shape) == 1:
        rows = emit.op("Reshape", [rows], {"shape": [1, shape[0]]}, dtype="int64")
    batch, length = (1, shape[0]) if len(shape) == 1 else shape
    counts = emit.const(np.zeros((batch, width), np.float32), "float32")
    for n, grams in sorted(_pool(site, low, high).items()):
        tokens = emit.const(np.asarray([g for g, _ in grams], np.int64).reshape(1, 1, len(grams), n), "int64")
        route = np.zeros((len(grams), width), np.float32)  # pool entry -> its output column
        route[np.arange(len(grams)), [column for _, column in grams]] = 1
        route_name = emit.const(route, "float32")
        for distance in range(1, (skips + 1 if n > 1 else 1) + 1):
            positions = length - (n - 1) * distance
            if positions <= 0:
                continue
            items = [emit.op("Slice", [rows], {"starts": [0, j * distance],
                                               "limits": [batch, j * distance + positions]}, dtype="int64")
                     for j in range(n)]
            windows = emit.op("Reshape", [emit.op("Concat", [emit.op("Unsqueeze", [item], {"dim": 2}, dtype="int64")
                                                             for item in items], {"dim": 2}, dtype="int64")],
                              {"shape": [batch, positions, 1, n]}, dtype="int64")
            agree = emit.convert(emit.compare("eq", windows, tokens), "float32")
            agreeing = emit.op("Reduction", [agree], {"dim": [3], "keepdim": False, "reduction": "sum"},
                               dtype="float32")
            matches = emit.convert(emit.compare("eq", agreeing, emit.const(float(n), "float32")), "float32")
            found = emit.op("Reduction", [matches], {"dim": [1], "keepdim": False, "reduction": "sum"},
                            dtype="float32")
            counts = emit.fn("add", [counts, emit.op("MatMul", [found, route_name], dtype="float32")])
    scale = emit.const(np.asarray(weights[:width] if weights else np.ones(width), np.float32), "float32")
    if mode == "IDF":
        counts = emit.fn("multiply", [emit.convert(emit.compare("gt", counts, emit.const(0.0, "float32")),
                                                   "float32"), scale])
    elif mode == "TFIDF":
        counts = emit.fn("multiply", [counts, scale])
    out_shape = [width] if len(shape) == 1 else [batch, width]
    emit.op("Reshape", [counts], {"shape": out_shape}, dtype="float32", out=site.outputs[0])
    return emit.ops


TRANSLATORS = {"TfIdfVectorizer": translate_tf_idf_vectorizer}
