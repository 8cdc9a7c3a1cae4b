"""3-D pooling (max, average, adaptive) on hand-made one-op models against brute-force float64
references written from the PyTorch docs.

The fixture pool3d checks the same ops against PyTorch.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from test_ops_activation import one_op


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def out_size(size, k, s, p, ceil):
    span = size + 2 * p - k
    n = (-(-span // s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= size + p:  # the last window must start inside the input or left padding
        n -= 1
    return n


def avg_pool3d_reference(x, kernel, stride, padding, ceil=False, include_pad=True, divisor=None):
    x = np.asarray(x, np.float64)
    sizes = x.shape[2:]
    outs = [out_size(n, k, s, p, ceil) for n, k, s, p in zip(sizes, kernel, stride, padding)]
    out = np.zeros(x.shape[:2] + tuple(outs))
    for index in itertools.product(*[range(o) for o in outs]):
        starts = [i * s - p for i, s, p in zip(index, stride, padding)]
        ends = [min(a + k, n + p) for a, k, n, p in zip(starts, kernel, sizes, padding)]
        padded_count = math.prod(e - a for a, e in zip(starts, ends))
        lo = [max(a, 0) for a in starts]
        hi = [min(e, n) for e, n in zip(ends, sizes)]
        window = x[(Ellipsis, *[slice(a, b) for a, b in zip(lo, hi)])]
        count = divisor or (padded_count if include_pad else math.prod(b - a for a, b in zip(lo, hi)))
        out[(Ellipsis, *index)] = window.sum(axis=(2, 3, 4)) / count
    return out


def max_pool3d_reference(x, kernel, stride, ceil=False):
    sizes = x.shape[2:]
    outs = [out_size(n, k, s, 0, ceil) for n, k, s in zip(sizes, kernel, stride)]
    out = np.zeros(x.shape[:2] + tuple(outs), np.float32)
    for index in itertools.product(*[range(o) for o in outs]):
        window = x[(Ellipsis, *[slice(i * s, i * s + k) for i, s, k in zip(index, stride, kernel)])]
        out[(Ellipsis, *index)] = window.max(axis=(2, 3, 4))
    return out


def adaptive_reference(x, outs, reduce):
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(outs))
    for index in itertools.product(*[range(o) for o in outs]):
        bounds = [(i * n // o, -(-(i + 1) * n // o)) for i, n, o in zip(index, sizes, outs)]
        window = np.asarray(x, np.float64)[(Ellipsis, *[slice(a, b) for a, b in bounds])]
        out[(Ellipsis, *index)] = reduce(window, axis=(2, 3, 4))
    return out


@pytest.mark.parametrize("params", [
    {"kernel_size": (2, 2, 2), "stride": (1, 1, 1), "padding": (1, 1, 1), "count_include_pad": False},
    {"kernel_size": (3, 2, 3), "stride": (2, 2, 2), "padding": (1, 0, 1), "count_include_pad": True,
     "ceil_mode": True},
    {"kernel_size": (1, 2, 2), "stride": None, "padding": (0, 0, 0), "divisor_override": 3, "ceil_mode": True},
], ids=["exclude_pad", "ceil_include_pad", "divisor_override"])
def test_avg_pool3d(tmp_path, params):
    x = rand((2, 3, 4, 5, 6))
    (got,), _ = one_op(tmp_path, "nn.AvgPool3d", [x], params)
    stride = params["stride"] or params["kernel_size"]
    want = avg_pool3d_reference(x, params["kernel_size"], stride, params["padding"], params.get("ceil_mode", False),
                                params.get("count_include_pad", True), params.get("divisor_override"))
    np.testing.assert_allclose(got, want, atol=1e-5)
    (functional,), _ = one_op(tmp_path, "F.avg_pool3d", [x], params)
    np.testing.assert_array_equal(functional, got)


def test_max_pool3d_ceil_mode(tmp_path):
    x = rand((1, 2, 5, 6, 5), 1)
    (got,), _ = one_op(tmp_path, "nn.MaxPool3d", [x], {"kernel_size": (2, 3, 2), "stride": 2, "ceil_mode": True})
    np.testing.assert_array_equal(got, max_pool3d_reference(x, (2, 3, 2), (2, 2, 2), ceil=True))


@pytest.mark.parametrize("op_type,reduce", [("nn.AdaptiveMaxPool3d", np.max), ("nn.AdaptiveAvgPool3d", np.mean)])
def test_adaptive_pool3d(tmp_path, op_type, reduce):
    x = rand((2, 2, 5, 7, 4), 2)
    (got,), _ = one_op(tmp_path, op_type, [x], {"output_size": (2, 3, 3)})
    np.testing.assert_allclose(got, adaptive_reference(x, (2, 3, 3), reduce), atol=1e-6)
