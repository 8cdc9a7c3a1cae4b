"""Fast convolution paths (kuiper/ops/conv_algorithms.py) against the reference im2col path.

Each nn.Conv2d picks its algorithm at build time (pointwise, depthwise, winograd,
im2col).  Every test here builds the op, checks which path it picked, and compares
its output with ``ConvNd.compute_im2col`` on the same op, the reference path, within
1e-4 (max abs).  The Winograd matrices are also checked in exact arithmetic, and the
F(4x4, 3x3) error is measured on realistic magnitudes (batch-normalised activations
after ReLU, He-initialised weights) against a float64 reference.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.ops import conv_algorithms as algorithms
from kuiper.ops import conv as conv_module
from kuiper.ops import pooling_max as pooling_module
from kuiper.ops.conv import Conv2d
from kuiper.ops.pooling_max import MaxPool1d, MaxPool2d

from conftest import pnnx_node

TOLERANCE = 1e-4  # max abs difference from the im2col path


def make_conv(backend_name, in_channels, out_channels, kernel, stride=1, padding=1, groups=1, dilation=1,
              bias=True, padding_mode="zeros", seed=0):
    rng = np.random.default_rng(seed)
    kernel = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
    fan_in = in_channels // groups * kernel[0] * kernel[1]
    weight = (rng.standard_normal((out_channels, in_channels // groups) + kernel) * np.sqrt(2 / fan_in))
    attrs = {"weight": weight.astype(np.float32)}
    if bias:
        attrs["bias"] = rng.standard_normal(out_channels).astype(np.float32)

    def pair(v):
        return list(v) if isinstance(v, (tuple, list)) else [v, v]

    params = dict(stride=pair(stride), padding=padding if isinstance(padding, str) else pair(padding),
                  dilation=pair(dilation), groups=groups, bias=bias, padding_mode=padding_mode,
                  kernel_size=list(kernel), in_channels=in_channels, out_channels=out_channels)
    node = pnnx_node("nn.Conv2d", "conv", ["x"], ["y"], params=params, attrs=attrs)
    return Conv2d(node, get_backend(backend_name))


def activations(shape, seed=1):
    """Like a batch-normalised feature map after ReLU: half zeros, the rest up to about 8."""
    rng = np.random.default_rng(seed)
    return np.maximum(rng.standard_normal(shape) * 2.0, 0.0).astype(np.float32)


def fast_and_reference(op, x):
    """(fast path output, im2col output) as NumPy arrays."""
    backend = op.backend
    x = backend.asarray(x)
    fast = op.forward(x)
    reference = op.compute_im2col(x, op.static_weight, op.static_bias)
    return backend.to_numpy(fast), backend.to_numpy(reference)


def assert_matches_reference(op, x):
    fast, reference = fast_and_reference(op, x)
    assert fast.shape == reference.shape
    error = float(np.max(np.abs(fast - reference)))
    assert error <= TOLERANCE, f"{op.algorithm}: max abs error {error:.3g} from the im2col path"
    return error


# -- which path each conv takes ------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, algorithm",
    [
        (dict(in_channels=16, out_channels=32, kernel=1, padding=0), "pointwise"),
        (dict(in_channels=16, out_channels=32, kernel=1, padding=0, stride=2), "pointwise"),
        (dict(in_channels=16, out_channels=32, kernel=1, padding=0, groups=4), "pointwise"),
        (dict(in_channels=16, out_channels=32, kernel=1, padding=1), "im2col"),  # padded 1x1
        (dict(in_channels=32, out_channels=32, kernel=3, groups=32), "depthwise"),
        (dict(in_channels=32, out_channels=32, kernel=5, stride=2, padding=2, groups=32), "depthwise"),
        (dict(in_channels=32, out_channels=32, kernel=3, groups=32, dilation=2), "im2col"),
        (dict(in_channels=16, out_channels=64, kernel=3, groups=16), "im2col"),  # channel multiplier 4
        (dict(in_channels=16, out_channels=16, kernel=3), "winograd"),
        (dict(in_channels=64, out_channels=16, kernel=3, padding="same"), "winograd"),
        (dict(in_channels=8, out_channels=64, kernel=3), "im2col"),  # too few channels
        (dict(in_channels=16, out_channels=16, kernel=3, stride=2), "im2col"),
        (dict(in_channels=16, out_channels=16, kernel=3, dilation=2, padding=2), "im2col"),
        (dict(in_channels=16, out_channels=16, kernel=3, groups=2), "im2col"),
        (dict(in_channels=16, out_channels=16, kernel=(3, 1), padding=(1, 0)), "im2col"),
        (dict(in_channels=16, out_channels=16, kernel=7, stride=2, padding=3), "im2col"),
    ],
)
def test_algorithm_chosen_at_build_time(kwargs, algorithm):
    assert make_conv("numpy", **kwargs).algorithm == algorithm


def test_winograd_tile_size_rule():
    # F(4x4) with >= 32 tiles of 4x4; else F(2x2) with >= 32 tiles of 2x2; else im2col
    assert algorithms.winograd_tile_size(1, 56, 56) == 4  # 196 tiles
    assert algorithms.winograd_tile_size(1, 28, 28) == 4  # 49 tiles
    assert algorithms.winograd_tile_size(1, 14, 14) == 2  # 16 tiles of 4x4, 49 of 2x2
    assert algorithms.winograd_tile_size(1, 7, 7) is None  # 16 tiles of 2x2
    assert algorithms.winograd_tile_size(2, 7, 7) == 2
    assert algorithms.winograd_tile_size(8, 7, 7) == 4


# -- exactness of the Winograd matrices ------------------------------------------------------


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_matrices_compute_the_correlation_exactly(m):
    """A^T [(G g) * (B^T d)] = the 1-D correlation of d with g, in exact rational arithmetic."""
    bt, g, at = algorithms.winograd_fractions(m)
    alpha = m + 2
    for tap, position in itertools.product(range(3), range(alpha)):  # unit filter, unit input: bilinear
        filtered = [g[i][tap] for i in range(alpha)]
        data = [bt[i][position] for i in range(alpha)]
        result = [sum(at[k][i] * filtered[i] * data[i] for i in range(alpha)) for k in range(m)]
        expected = [Fraction(1 if position == k + tap else 0) for k in range(m)]
        assert result == expected, (tap, position)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_bias_point_has_a_column_of_ones(m):
    _, _, at = algorithms.winograd_fractions(m)
    assert all(row[algorithms._WINOGRAD_POINT_ONE] == 1 for row in at)


# -- each fast path against im2col ---------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, shape",
    [
        (dict(in_channels=16, out_channels=24, kernel=1, padding=0), (2, 16, 10, 9)),
        (dict(in_channels=16, out_channels=24, kernel=1, padding=0, stride=2), (2, 16, 11, 10)),
        (dict(in_channels=16, out_channels=24, kernel=1, padding=0, stride=(3, 2)), (1, 16, 11, 10)),
        (dict(in_channels=16, out_channels=24, kernel=1, padding=0, groups=4, bias=False), (3, 16, 5, 7)),
        (dict(in_channels=32, out_channels=32, kernel=3, groups=32), (2, 32, 20, 17)),
        (dict(in_channels=32, out_channels=32, kernel=3, stride=2, groups=32), (1, 32, 21, 20)),
        (dict(in_channels=24, out_channels=24, kernel=5, stride=2, padding=2, groups=24), (2, 24, 17, 16)),
        (dict(in_channels=8, out_channels=8, kernel=(3, 5), stride=(1, 3), padding=(0, 2), groups=8), (2, 8, 9, 13)),
        (dict(in_channels=8, out_channels=8, kernel=3, stride=3, padding=0, groups=8, bias=False), (1, 8, 10, 11)),
        (dict(in_channels=8, out_channels=8, kernel=3, padding="same", groups=8), (1, 8, 6, 5)),
        (dict(in_channels=4, out_channels=4, kernel=3, padding=1, groups=4, padding_mode="reflect"), (2, 4, 7, 6)),
        (dict(in_channels=4, out_channels=4, kernel=2, stride=2, padding=1, groups=4, padding_mode="circular"),
         (1, 4, 7, 6)),
        (dict(in_channels=64, out_channels=64, kernel=3), (1, 64, 56, 56)),  # F(4x4), 196 tiles, one chunk
        (dict(in_channels=32, out_channels=48, kernel=3, padding=0), (2, 32, 13, 15)),  # F(2x2), cropped tiles
        (dict(in_channels=16, out_channels=16, kernel=3, padding=2), (3, 16, 9, 9)),  # F(2x2), padding 2
        (dict(in_channels=16, out_channels=16, kernel=3, padding=(0, 1), bias=False), (4, 16, 18, 17)),
        (dict(in_channels=16, out_channels=16, kernel=3, padding_mode="replicate"), (2, 16, 23, 22)),
        (dict(in_channels=16, out_channels=24, kernel=3), (5, 16, 30, 26)),  # 4 chunks of whole images
    ],
)
def test_fast_path_matches_im2col(backend_name, kwargs, shape):
    op = make_conv(backend_name, **kwargs)
    if op.algorithm == "im2col" and not op.backend.cpu_cache_blocking:
        pytest.skip(f"backend '{backend_name}' runs 3x3 convolutions as im2col: Winograd is for CPU caches")
    assert op.algorithm != "im2col"
    assert_matches_reference(op, activations(shape))


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["pointwise", "depthwise", "winograd"]),
    channels=st.sampled_from([1, 3, 16, 20]),
    kernel=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.tuples(st.integers(0, 2), st.integers(0, 2)),
    batch=st.integers(1, 3),
    size=st.tuples(st.integers(5, 20), st.integers(5, 20)),
    seed=st.integers(0, 2**16),
)
def test_fast_paths_match_im2col_on_random_shapes(kind, channels, kernel, stride, padding, batch, size, seed):
    if kind == "pointwise":
        kwargs = dict(in_channels=channels, out_channels=channels + 2, kernel=1, stride=stride, padding=0)
    elif kind == "depthwise":
        kwargs = dict(in_channels=channels, out_channels=channels, kernel=kernel, stride=stride, padding=padding,
                      groups=channels)
    else:
        channels = max(channels, algorithms.WINOGRAD_MIN_CHANNELS)
        kwargs = dict(in_channels=channels, out_channels=channels + 3, kernel=3, padding=padding)
    op = make_conv("numpy", seed=seed, **kwargs)
    assert op.algorithm == kind
    x = activations((batch, kwargs["in_channels"]) + size, seed=seed + 1)
    if kind == "winograd" and algorithms.winograd_tile_size(batch, size[0] + 2 * padding[0] - 2,
                                                              size[1] + 2 * padding[1] - 2) is None:
        x = activations((batch, kwargs["in_channels"], 20, 20), seed=seed + 1)  # enough tiles for Winograd
    padded = [size + sum(pads) for size, pads in zip(x.shape[2:], op.static_pads)]
    if any(k > size for k, size in zip(op.static_weight.kernel, padded)):
        return  # kernel larger than the padded input: a ShapeError on both paths
    assert_matches_reference(op, x)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("channels, size", [(64, 56), (128, 28), (256, 14), (512, 8)])
def test_winograd_error_on_realistic_magnitudes(m, channels, size):
    """F(m x m, 3x3) in float32 vs float64 direct convolution: within 1e-4 where outputs reach about 8.

    Measured: about 3e-5 for F(4x4) (4e-6 relative to the output's magnitude) and 5e-6 for F(2x2);
    the error grows in proportion to the activations' magnitude.
    """
    backend = get_backend("numpy")
    op = make_conv("numpy", channels, channels, 3, seed=channels)
    x = activations((1, channels, size, size), seed=size)
    prepared = algorithms.WinogradWeight(backend, op.xp.reshape(op.static_weight.matrix, (channels, channels, 3, 3)), m)
    fast = algorithms.winograd_conv2d(op.xp, backend, x, prepared, ((1, 1), (1, 1)), op.static_bias_vector)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    weight = np.asarray(op.static_weight.matrix, np.float64).reshape(channels, channels, 3, 3)
    exact = np.einsum("nchwij,ocij->nohw", windows, weight) + np.asarray(op.static_bias_vector)[:, None, None]
    assert np.max(np.abs(exact)) > 4.0  # realistic magnitudes, not a trivially small output
    assert np.max(np.abs(fast - exact)) <= TOLERANCE
    reference = op.compute_im2col(x, op.static_weight, op.static_bias)
    assert np.max(np.abs(fast - reference)) <= TOLERANCE


def test_winograd_4x4_error_is_proportional_to_the_output_magnitude():
    """With activations 5x larger (outputs ~50, like a detector's neck) F(4x4) stays within 1e-5 relative.

    Measured: ~3.5e-6 of max|output|; at outputs of ~37 in YOLOv5's neck that is 7e-5 absolute.
    """
    backend = get_backend("numpy")
    op = make_conv("numpy", 128, 128, 3, seed=7, bias=False)
    x = 5.0 * activations((1, 128, 28, 28), seed=8)
    prepared = algorithms.WinogradWeight(backend, op.xp.reshape(op.static_weight.matrix, (128, 128, 3, 3)), 4)
    fast = algorithms.winograd_conv2d(op.xp, backend, x, prepared, ((1, 1), (1, 1)))
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    exact = np.einsum("nchwij,ocij->nohw", windows, np.asarray(op.static_weight.matrix, np.float64).reshape(128, 128, 3, 3))
    scale = float(np.max(np.abs(exact)))
    assert scale > 30.0
    assert np.max(np.abs(fast - exact)) <= 1e-5 * scale


def test_winograd_falls_back_to_im2col_for_few_tiles():
    op = make_conv("numpy", 32, 32, 3)
    x = activations((1, 32, 7, 7))
    fast, reference = fast_and_reference(op, x)
    np.testing.assert_array_equal(fast, reference)  # the same path: identical
    assert op.winograd_weights == {}  # nothing transformed for a call that does not use it


def test_winograd_transforms_the_weight_once_per_tile_size():
    op = make_conv("numpy", 16, 16, 3)
    op.forward(activations((1, 16, 40, 40)))
    first = op.winograd_weights[4]
    op.forward(activations((2, 16, 40, 40)))
    assert op.winograd_weights[4] is first and set(op.winograd_weights) == {4}
    op.forward(activations((1, 16, 16, 16)))  # 16 tiles of 4x4, 64 of 2x2
    assert set(op.winograd_weights) == {2, 4}


@pytest.mark.parametrize("kwargs", [
    dict(in_channels=16, out_channels=16, kernel=3),
    dict(in_channels=16, out_channels=16, kernel=3, groups=16),
    dict(in_channels=16, out_channels=8, kernel=1, padding=0, stride=2),
])
def test_fast_paths_accept_non_contiguous_and_unbatched_inputs(kwargs):
    op = make_conv("numpy", **kwargs)
    x = activations((2, 16, 24, 24))
    transposed = np.swapaxes(np.swapaxes(x, 2, 3).copy(), 2, 3)  # same values, Fortran-like strides
    fast, reference = fast_and_reference(op, transposed)
    assert np.max(np.abs(fast - reference)) <= TOLERANCE
    np.testing.assert_array_equal(op.forward(x[0]), op.forward(x[:1])[0])


def test_im2col_in_chunks_of_images_equals_one_call(monkeypatch):
    op = make_conv("numpy", 3, 8, 7, stride=2, padding=3)  # like a ResNet stem
    x = activations((5, 3, 20, 20))
    whole = op.compute_im2col(x, op.static_weight, op.static_bias)
    monkeypatch.setattr(conv_module, "IM2COL_CHUNK_BYTES", 2 * 3 * 49 * 10 * 10 * 4)  # two images per chunk
    calls = []
    im2col = op.compute_im2col
    monkeypatch.setattr(op, "compute_im2col", lambda x, *rest: calls.append(x.shape[0]) or im2col(x, *rest))
    np.testing.assert_array_equal(op.forward(x), whole)
    assert calls == [2, 2, 1]


@pytest.mark.parametrize("constant", ["DEPTHWISE_CHANNELS_CHUNK_BYTES", "DEPTHWISE_IMAGES_CHUNK_BYTES"])
def test_depthwise_in_blocks_of_channels_or_images_equals_one_block(monkeypatch, constant):
    op = make_conv("numpy", 12, 12, 3, stride=2, groups=12)
    x = activations((3, 12, 15, 14))
    whole = op.forward(x)
    monkeypatch.setattr(algorithms, constant, 1)  # one channel per block, or one image per chunk
    np.testing.assert_array_equal(op.forward(x), whole)
    assert_matches_reference(op, x)


def test_input_of_another_dtype_takes_the_im2col_path():
    op = make_conv("numpy", 16, 16, 3)
    x = activations((1, 16, 32, 32)).astype(np.float64)
    np.testing.assert_array_equal(op.forward(x), op.compute_im2col(x, op.static_weight, op.static_bias))


# -- max pooling: separable maxima against a direct window maximum -----------------------------


def window_max(x, kernel, stride, padding, dilation, ceil_mode):
    """Max over each (dilated) window of x padded with -inf, computed window by window."""
    spatial = len(kernel)
    outs = []
    for size, k, s, p, d in zip(x.shape[-spatial:], kernel, stride, padding, dilation):
        span = d * (k - 1) + 1
        count = size + 2 * p - span
        out = (-(-count // s) if ceil_mode else count // s) + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        outs.append(out)
    padded = np.pad(x, [(0, 0)] * (x.ndim - spatial) + [(p, p + s * k) for p, s, k in zip(padding, stride, kernel)],
                    constant_values=-np.inf)
    result = np.empty(x.shape[:-spatial] + tuple(outs), x.dtype)
    for index in itertools.product(*(range(o) for o in outs)):
        window = padded[(Ellipsis,) + tuple(slice(i * s, i * s + d * (k - 1) + 1, d)
                                            for i, s, d, k in zip(index, stride, dilation, kernel))]
        result[(Ellipsis,) + index] = window.reshape(window.shape[:-spatial] + (-1,)).max(axis=-1)
    return result


@settings(max_examples=40, deadline=None)
@given(
    spatial=st.sampled_from([1, 2]),
    kernel=st.integers(1, 4),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    ceil_mode=st.booleans(),
    size=st.integers(5, 12),
    seed=st.integers(0, 2**16),
)
def test_max_pool_equals_the_window_maximum(spatial, kernel, stride, dilation, ceil_mode, size, seed):
    padding = kernel // 2
    params = dict(kernel_size=[kernel] * spatial, stride=[stride] * spatial, padding=[padding] * spatial,
                  dilation=[dilation] * spatial, ceil_mode=ceil_mode)
    if dilation * (kernel - 1) + 1 > size + 2 * padding:
        return
    op_class = MaxPool1d if spatial == 1 else MaxPool2d
    op = op_class(OpNode(op_class.types[0], "pool", ["x"], ["y"], params=params), get_backend("numpy"))
    x = np.random.default_rng(seed).standard_normal((2, 3) + (size,) * spatial).astype(np.float32)
    expected = window_max(x, (kernel,) * spatial, (stride,) * spatial, (padding,) * spatial,
                          (dilation,) * spatial, ceil_mode)
    np.testing.assert_array_equal(op.forward(x), expected)


def test_max_pool_in_chunks_of_images_equals_the_window_maximum(monkeypatch):
    monkeypatch.setattr(pooling_module, "POOL_CHUNK_BYTES", 2 * 3 * 9 * 9 * 4)  # two images per chunk
    params = dict(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False)
    op = MaxPool2d(pnnx_node("nn.MaxPool2d", "pool", ["x"], ["y"], params=params), get_backend("numpy"))
    x = np.random.default_rng(0).standard_normal((5, 3, 9, 9)).astype(np.float32)
    np.testing.assert_array_equal(op.forward(x), window_max(x, (3, 3), (2, 2), (1, 1), (1, 1), False))
