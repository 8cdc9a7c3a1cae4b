"""``predict``: a model mapped over the chunks of dask arrays, outputs declared up front.

Dim 0 of every input and output is the batch: a chunk of rows in gives the same rows
out.  The other dims of each output come from the model's declared output shape; a dim
the model leaves free ('?') becomes an unknown (NaN) chunk size, as dask does for
boolean indexing.  Nothing is computed to discover shapes or dtypes.
"""

from __future__ import annotations

import math
import string

import numpy as np

from ..errors import InputError, KuiperError, ShapeError
from .model_cache import ModelSpec, cached_model, resolve_model

DEFAULT_BATCH_SIZE = 16  # rows per chunk when a NumPy array is given without batch_size


def predict(model, data, *, backend: str | None = None, batch_size: int | None = None, **load_options):
    """Run ``model`` on every chunk of ``data`` (chunked along dim 0) on the current Dask scheduler.

    ``model``: a path (``.pnnx.param`` ...) or a Model loaded from a file.  ``data``: one array
    for a one-input model, or a tuple/list in the model's input order, or a dict by input name;
    dask arrays or NumPy arrays (chunked into ``batch_size`` rows for you).  ``batch_size``
    rechunks dask arrays too.  ``load_options`` go to ``kuiper.load`` on every worker
    (``fuse=False``, ``bin_path=...``).

    Returns a dask array for a one-output model, else a tuple of them, in the model's output order.
    The model is loaded once here (a broken model fails now, not on the cluster) and once per
    worker process; only its path travels with the tasks.
    """
    import dask.array as da
    from dask.base import tokenize

    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    spec, local = resolve_model(model, backend, load_options)
    inputs = _input_arrays(local, data, batch_size)
    batch_chunks = inputs[0].chunks[0]
    output_tails = [_declared_tail(local, out) for out in local.outputs]

    # One task per chunk runs the model and returns every output; one light task per
    # chunk and output picks its array out, so a multi-output model runs once per chunk.
    index_args = [spec, None]
    letters = iter(string.ascii_letters[1:])
    for array in inputs:
        index_args += [array, "a" + "".join(next(letters) for _ in range(array.ndim - 1))]
    token = tokenize(spec, *inputs)
    per_chunk = da.blockwise(
        _run_chunk, "a", *index_args, output_tails, None,
        name=f"kuiper-predict-{token}", dtype=object, meta=np.empty((0,), dtype=object), concatenate=True,
    )
    outputs = []
    for position, (out, tail) in enumerate(zip(local.outputs, output_tails)):
        dtype = np.dtype(out.dtype or "float32")
        chunks = (batch_chunks,) + tuple((math.nan if d is None else d,) for d in tail)
        outputs.append(
            per_chunk.map_blocks(
                _pick, position, name=f"kuiper-output-{position}-{token}", new_axis=list(range(1, len(chunks))),
                chunks=chunks, dtype=dtype, meta=np.empty((0,) * len(chunks), dtype=dtype),
            )
        )
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _input_arrays(model, data, batch_size: int | None) -> list:
    """The feeds as dask arrays in input order, chunked alike along dim 0 and whole along the rest."""
    import dask.array as da

    specs = model.inputs
    if isinstance(data, dict):
        unknown = sorted(set(data) - {s.name for s in specs})
        missing = [s.name for s in specs if s.name not in data]
        if unknown or missing:
            raise InputError(f"{model.source}: data keys must be the input names {[s.name for s in specs]}; "
                             f"missing {missing}, unknown {unknown}")
        arrays = [data[s.name] for s in specs]
    elif isinstance(data, (tuple, list)):
        arrays = list(data)
    else:
        arrays = [data]
    if len(arrays) != len(specs):
        raise InputError(f"{model.source}: the model has {len(specs)} input(s) ({', '.join(s.name for s in specs)}), "
                         f"got {len(arrays)} array(s)")
    result = []
    for spec, array in zip(specs, arrays):
        if not isinstance(array, da.Array):
            array = np.asarray(array)
        _check_input(model, spec, array)
        if not isinstance(array, da.Array):
            array = da.from_array(array, chunks=(batch_size or DEFAULT_BATCH_SIZE,) + (-1,) * (array.ndim - 1))
        rows = batch_size or (result[0].chunks[0] if result else array.chunks[0])
        result.append(array.rechunk((rows,) + (-1,) * (array.ndim - 1)))
    lengths = {array.shape[0] for array in result}
    if len(lengths) > 1:
        raise ShapeError(f"{model.source}: every input needs the same number of rows (dim 0), got "
                         + ", ".join(f"{s.name}: {a.shape[0]}" for s, a in zip(specs, result)))
    return result


def _check_input(model, spec, array) -> None:
    """Rank and fixed non-batch dims, checked on the client so a mismatch never reaches a worker."""
    if array.ndim < 1:
        raise ShapeError(f"{model.source}: input '{spec.name}' needs a batch dim 0, got a scalar")
    if spec.shape is None:
        return
    if array.ndim != len(spec.shape) or any(
        want is not None and want != got for want, got in zip(spec.shape[1:], array.shape[1:])
    ):
        raise ShapeError(f"{model.source}: input '{spec.name}' expects shape {spec} (dim 0 and '?' dims may vary), "
                         f"got {tuple(array.shape)}")


def _declared_tail(model, out) -> tuple:
    if out.shape is None or len(out.shape) == 0:
        raise KuiperError(f"{model.source}: output '{out.name}' has no declared batch dim (shape {out}); "
                          "kuiper.dask maps models whose outputs keep dim 0 as the batch")
    return tuple(out.shape[1:])


def _run_chunk(spec: ModelSpec, *blocks_and_tails):
    """On a worker: run the cached model on one chunk; check the outputs against what was declared."""
    *blocks, tails = blocks_and_tails
    model = cached_model(spec)
    results = model(*blocks, to_numpy=True)
    results = results if isinstance(results, tuple) else (results,)
    rows = blocks[0].shape[0]
    for out, tail, value in zip(model.outputs, tails, results):
        declared = (rows,) + tuple(tail)
        if value.ndim != len(declared) or any(d is not None and d != g for d, g in zip(declared, value.shape)):
            raise ShapeError(f"{spec.path}: output '{out.name}' of a {rows}-row chunk has shape {value.shape}, "
                             f"declared {tuple('?' if d is None else d for d in declared)}")
    return results


def _pick(results, position: int):
    return results[position]
