"""The compiled CPU kernels (kuiper/numba_kernels) against the reference ops.

Each compiled op subclass must give what the reference op gives: convolutions are
compared with the op's own im2col path run in float64 (an independent reference:
no Winograd, no compiled loop), max pooling with the reference NumPy pooling,
within 1e-4 on outputs of magnitude ~1.  Shapes are small and odd, with strides,
padding, dilation, groups and batch > 1; every kernel compiles once per session
(float32, C-contiguous, the same argument types), which keeps this file to seconds
once numba's on-disk cache is warm.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.backends import get_backend
from kuiper.model_ir import OpNode
from kuiper.numba_kernels import conv as compiled_conv
from kuiper.numba_kernels import pooling as compiled_pooling
from kuiper.numba_kernels import runtime
from kuiper.ops.conv import Conv2d
from kuiper.ops.pooling_max import MaxPool2d

from conftest import pnnx_node

TOLERANCE = 1e-4


pytestmark = pytest.mark.usefixtures("kernel_variant")  # both builds of every kernel (conftest.py)


def conv_node(in_channels, out_channels, kernel, stride=1, padding=1, groups=1, dilation=1, bias=True, seed=0,
              dtype=np.float32, padding_mode="zeros"):
    rng = np.random.default_rng(seed)
    fan_in = in_channels // groups * kernel * kernel
    weight = rng.standard_normal((out_channels, in_channels // groups, kernel, kernel)) / np.sqrt(fan_in)
    attrs = {"weight": weight.astype(dtype)}
    if bias:
        attrs["bias"] = rng.standard_normal(out_channels).astype(dtype)
    params = {"stride": [stride, stride], "padding": [padding, padding], "dilation": [dilation, dilation],
                  "groups": groups, "bias": bias, "padding_mode": padding_mode}
    return pnnx_node("nn.Conv2d", "conv", ["x"], ["y"], params=params, attrs=attrs)


def float64_im2col(node, x):
    """The reference op's im2col path, in float64."""
    attrs = {key: value.astype(np.float64) for key, value in node.attrs.items()}
    node64 = OpNode(node.type, node.name, node.inputs, node.outputs, params=node.params, attrs=attrs)
    op = Conv2d(node64, get_backend("numpy"))
    return op.compute_im2col(x.astype(np.float64), op.static_weight, op.static_bias)


def inputs(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CONV_CASES = {
    # name: (batch, in, out, height, width, kernel, stride, padding, groups, dilation, expected path)
    "depthwise 3x3 s1 p1 batch 3": (3, 8, 8, 11, 13, 3, 1, 1, 8, 1, "depthwise"),
    "depthwise 3x3 s2 p1 odd": (2, 6, 6, 15, 9, 3, 2, 1, 6, 1, "depthwise"),
    "depthwise 5x5 s2 p2": (1, 5, 5, 12, 17, 5, 2, 2, 5, 1, "depthwise"),
    "depthwise 3x3 s1 p0": (1, 4, 4, 7, 5, 3, 1, 0, 4, 1, "depthwise"),
    "winograd F(4x4) odd size": (1, 16, 24, 13, 11, 3, 1, 1, 1, 1, "winograd"),
    "winograd F(4x4) batch 3 (chunks)": (3, 16, 16, 30, 27, 3, 1, 1, 1, 1, "winograd"),
    "winograd F(2x2) p0": (1, 16, 20, 14, 14, 3, 1, 0, 1, 1, "winograd"),
    "im2col 7x7 s2 p3 (stem)": (2, 3, 8, 15, 17, 7, 2, 3, 1, 1, "im2col"),
    "im2col 3x3 s2 groups 2 dilation 2": (2, 8, 12, 10, 9, 3, 2, 2, 2, 2, "im2col"),
    "im2col 3x3 s1, few channels": (1, 3, 5, 9, 8, 3, 1, 1, 1, 1, "im2col"),
    "im2col 3x3 winograd op on a tiny map": (1, 16, 16, 3, 5, 3, 1, 1, 1, 1, "winograd"),
}


@pytest.mark.usefixtures("conv_engine")
@pytest.mark.parametrize("case", CONV_CASES)
def test_compiled_conv_matches_float64_im2col(case):
    batch, cin, cout, height, width, kernel, stride, padding, groups, dilation, path = CONV_CASES[case]
    node = conv_node(cin, cout, kernel, stride, padding, groups, dilation)
    op = compiled_conv.CompiledConv2d(node, get_backend("numpy"))
    assert op.compiled == path, op.kernel_note
    x = inputs((batch, cin, height, width))
    got = op.forward(x)
    expected = float64_im2col(node, x)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.max(np.abs(got - expected)) <= TOLERANCE


@pytest.mark.usefixtures("conv_engine")
def test_compiled_conv_unbatched_input():
    node = conv_node(6, 6, 3, groups=6)
    op = compiled_conv.CompiledConv2d(node, get_backend("numpy"))
    x = inputs((6, 9, 7))
    np.testing.assert_allclose(op.forward(x), float64_im2col(node, x[None])[0], atol=TOLERANCE)


@pytest.mark.usefixtures("conv_engine")
def test_results_do_not_depend_on_the_thread_count():
    x = inputs((2, 16, 13, 11))
    ops = [compiled_conv.CompiledConv2d(conv_node(16, 16, 3, groups=16), get_backend("numpy")),
           compiled_conv.CompiledConv2d(conv_node(16, 16, 3), get_backend("numpy")),
           compiled_conv.CompiledConv2d(conv_node(16, 8, 3, stride=2), get_backend("numpy")),
           compiled_pooling.CompiledMaxPool2d(pool_node(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1]),
                                              get_backend("numpy"))]
    try:
        results = []
        for threads in (1, 2, 3):
            runtime.set_threads(threads)
            results.append([op.forward(x) for op in ops])
    finally:
        runtime.set_threads(None)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


def test_conv_falls_back_to_the_reference_with_a_reason(conv_engine):
    backend = get_backend("numpy")
    float64 = compiled_conv.CompiledConv2d(conv_node(4, 4, 3, dtype=np.float64), backend)
    assert float64.compiled is None and "float64" in float64.kernel_note
    reflect = compiled_conv.CompiledConv2d(conv_node(4, 4, 3, padding_mode="reflect"), backend)
    assert reflect.compiled is None and "reflect" in reflect.kernel_note
    pointwise = compiled_conv.CompiledConv2d(conv_node(4, 8, 1, padding=0), backend)
    assert pointwise.compiled == "pointwise"
    assert ("oneDNN" if conv_engine == "onednn" else "GEMM") in pointwise.kernel_note
    # A float64 input to a float32 weight runs the reference path, as Conv2d does.
    op = compiled_conv.CompiledConv2d(conv_node(4, 4, 3, groups=4), backend)
    x = inputs((1, 4, 6, 6)).astype(np.float64)
    reference = Conv2d(conv_node(4, 4, 3, groups=4), backend).forward(x)
    np.testing.assert_array_equal(op.forward(x), reference)


def pool_node(**params):
    return pnnx_node("nn.MaxPool2d", "pool", ["x"], ["y"], params=params)


POOL_CASES = {
    "3x3 s2 p1": {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]},
    "5x5 s1 p2 (SPPF)": {"kernel_size": [5, 5], "stride": [1, 1], "padding": [2, 2]},
    "2x2 default stride": {"kernel_size": [2, 2]},
    "3x2 s(2,3) dilation (2,1) ceil_mode": {"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "dilation": [2, 1],
                                                "ceil_mode": True},
}


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 5, 13, 12), (3, 9, 7)])
def test_compiled_max_pool_matches_reference(case, shape):
    node = pool_node(**POOL_CASES[case])
    x = inputs(shape)
    expected = MaxPool2d(node, get_backend("numpy")).forward(x)
    got = compiled_pooling.CompiledMaxPool2d(node, get_backend("numpy")).forward(x)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


POOL1D_CASES = {
    "4 s4 (M5)": {"kernel_size": [4], "stride": [4]},
    "3 s2 p1": {"kernel_size": [3], "stride": [2], "padding": [1]},
    "3 s2 dilation 2 ceil_mode": {"kernel_size": [3], "stride": [2], "padding": [1], "dilation": [2], "ceil_mode": True},
    "5 default stride": {"kernel_size": [5]},
}


@pytest.mark.parametrize("case", POOL1D_CASES)
@pytest.mark.parametrize("shape", [(2, 5, 29), (3, 17)])
def test_compiled_max_pool_1d_matches_reference(case, shape):
    from kuiper.ops.pooling_max import MaxPool1d

    node = pnnx_node("nn.MaxPool1d", "pool", ["x"], ["y"], params=POOL1D_CASES[case])
    x = inputs(shape)
    x.flat[7] = np.nan  # propagated like the reference
    expected = MaxPool1d(node, get_backend("numpy")).forward(x)
    got = compiled_pooling.CompiledMaxPool1d(node, get_backend("numpy")).forward(x)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


AVG_POOL_CASES = {
    "3x3 s1 p1 no pad count (PoolFormer)": {"kernel_size": [3, 3], "stride": [1, 1], "padding": [1, 1],
                                            "count_include_pad": False},
    "3x3 s2 p1 ceil_mode counting pads": {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True},
    "2x2 default stride": {"kernel_size": [2, 2]},
    "3x2 s(2,1) divisor_override 5": {"kernel_size": [3, 2], "stride": [2, 1], "padding": [1, 0],
                                      "divisor_override": 5},
}


@pytest.mark.parametrize("case", AVG_POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 5, 13, 12), (3, 9, 7)])
def test_compiled_avg_pool_matches_float64(case, shape):
    from kuiper.ops.pooling_average import AvgPool2d

    node = pnnx_node("nn.AvgPool2d", "pool", ["x"], ["y"], params=AVG_POOL_CASES[case])
    x = inputs(shape)
    expected = AvgPool2d(node, get_backend("numpy")).forward(x.astype(np.float64))
    got = compiled_pooling.CompiledAvgPool2d(node, get_backend("numpy")).forward(x)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_compiled_max_pool_propagates_nan_like_the_reference():
    x = inputs((1, 2, 6, 6))
    x[0, 0, 2, 3] = np.nan
    x[0, 1, 0, 0] = np.nan
    node = pool_node(kernel_size=[3, 3], stride=[2, 2], padding=[1, 1])
    expected = MaxPool2d(node, get_backend("numpy")).forward(x)
    got = compiled_pooling.CompiledMaxPool2d(node, get_backend("numpy")).forward(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(got).sum() >= 2
    np.testing.assert_array_equal(got[~np.isnan(got)], expected[~np.isnan(expected)])


def test_kernels_register_through_the_hooks_for_numpy_array_backends_and_switch_off(monkeypatch):
    from kuiper import numba_kernels, plugins

    monkeypatch.delenv(runtime.DISABLE_ENV, raising=False)
    runtime.availability.cache_clear()
    plugins.reset_registries()
    kernels = plugins.kernel_registry("numpy")
    assert {kernels[t].plugin for t in ("Conv2d", "Conv", "MaxPool2d")} == {"numba_kernels"}
    assert set(plugins.primitive_registry("numpy")) == {"compile_elementwise", "softmax_in_place", "blas_threads"}
    assert plugins.kernel_registry("cupy") == {} and plugins.primitive_registry("cupy") == {}
    monkeypatch.setenv(runtime.DISABLE_ENV, "off")
    runtime.availability.cache_clear()
    try:
        assert numba_kernels.kernels() == {}
        assert numba_kernels.kuiper_add_primitives(frozenset({"numpy-arrays"})) is None
        assert "switched off by KUIPER_NUMBA=off" in numba_kernels.describe()
    finally:
        monkeypatch.delenv(runtime.DISABLE_ENV)
        runtime.availability.cache_clear()
    assert "compiled CPU kernels: on" in numba_kernels.describe()
    runtime.availability.cache_clear()  # back to what the environment of this session says


def test_a_numba_that_fails_to_import_is_named_with_the_way_around_it_when_a_loop_first_runs(monkeypatch):
    from kuiper.errors import BackendUnavailableError

    monkeypatch.setitem(sys.modules, "numba", None)  # what a numba built for another NumPy does: import fails
    runtime._numba.cache_clear()
    try:
        loops = runtime.KernelModule("pool_kernels")
        with pytest.raises(BackendUnavailableError, match=r"failed to import .*set KUIPER_NUMBA=0"):
            loops.max_pool2d
    finally:
        monkeypatch.delitem(sys.modules, "numba")
        runtime._numba.cache_clear()
    assert callable(runtime.KernelModule("pool_kernels").max_pool2d)


def test_a_kuiper_numba_value_that_is_neither_on_nor_off_is_a_config_error(monkeypatch):
    from kuiper.errors import ConfigError

    monkeypatch.setenv(runtime.DISABLE_ENV, "maybe")
    runtime.availability.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"KUIPER_NUMBA='maybe': expected 1 .* or 0"):
            runtime.availability()
    finally:
        monkeypatch.delenv(runtime.DISABLE_ENV)
        runtime.availability.cache_clear()


def test_compiled_layer_norm_matches_float64():
    from kuiper.numba_kernels.norm import CompiledLayerNorm

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4, 5)) * 3 + 1).astype(np.float32)
    weight = rng.standard_normal((4, 5)).astype(np.float32)
    bias = rng.standard_normal((4, 5)).astype(np.float32)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(-2, -1), keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=(-2, -1), keepdims=True)
    normalized = (x64 - mean) / np.sqrt(var + 1e-5)
    cases = [({"weight": weight, "bias": bias}, {"elementwise_affine": True}, normalized * weight + bias),
             ({}, {"elementwise_affine": False}, normalized)]
    for attrs, params, expected in cases:
        node = pnnx_node("nn.LayerNorm", "ln", ["x"], ["y"], params=dict(normalized_shape=[4, 5], eps=1e-5, **params),
                      attrs=attrs)
        op = CompiledLayerNorm(node, get_backend("numpy"))
        assert op.compiled
        np.testing.assert_allclose(op.forward(x), expected, atol=TOLERANCE)


@pytest.mark.parametrize("shape", [(2, 3, 7), (5, 1), (3, 197), (1, 1031), (2, 5000), (4, 80, 20)])
def test_compiled_softmax_matches_float64(shape):
    from kuiper.backends.base import Backend
    from kuiper.numba_kernels.norm import softmax_last_axis

    x = (np.random.default_rng(4).standard_normal(shape) * 4).astype(np.float32)
    x.flat[0] = 80.0  # exp of the unshifted value would overflow float32
    x64 = x.astype(np.float64)
    expected = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    expected /= expected.sum(axis=-1, keepdims=True)
    got = x.copy()
    assert softmax_last_axis(got)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-9)
    # The NumPy backend takes this path for the last axis (oneDNN's from NATIVE_ELEMENTS, where it is
    # found: tests/onednn/test_onednn_softmax.py); the generic one gives the same.
    from kuiper import onednn
    from kuiper.numba_kernels.softmax_native import NATIVE_ELEMENTS

    backend = get_backend("numpy")
    if x.size < NATIVE_ELEMENTS or not onednn.available():
        np.testing.assert_array_equal(backend.softmax_in_place(x.copy(), -1), got)
    np.testing.assert_allclose(backend.softmax_in_place(x.copy(), -1), expected, rtol=2e-6, atol=1e-9)
    np.testing.assert_allclose(Backend.softmax_in_place(backend, x.copy(), -1), expected, rtol=2e-6, atol=1e-9)


def test_compiled_softmax_keeps_nan_and_infinities_and_thread_count_does_not_matter():
    from kuiper.numba_kernels.norm import softmax_last_axis

    x = np.float32([[0.0, np.nan, 1.0], [-np.inf, 0.0, 0.0], [np.inf, 0.0, 1.0]])
    got = x.copy()
    assert softmax_last_axis(got)
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(got[1], [0.0, 0.5, 0.5])
    assert np.isnan(got[2]).all()  # inf - inf is NaN, and so is the sum, as in PyTorch
    big = np.random.default_rng(5).standard_normal((301, 77)).astype(np.float32)
    results = []
    for count in (1, 2, 3):
        runtime.set_threads(count)
        results.append(big.copy())
        softmax_last_axis(results[-1])
    runtime.set_threads(None)
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_without_numba_the_reference_ops_run_and_info_says_why(monkeypatch, tmp_path):
    import sys

    from conftest import op_model

    from kuiper import numba_kernels
    from kuiper.plugins import reset_registries

    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` now raises ImportError
    runtime.availability.cache_clear()
    runtime._numba.cache_clear()
    reset_registries()
    try:
        assert numba_kernels.kernels() == {}
        assert "numba is not installed" in numba_kernels.describe()
        weight = np.ones((4, 1, 3, 3), np.float32)
        model = op_model(tmp_path, "nn.Conv2d conv 1 1 x y in_channels=4 out_channels=4 kernel_size=(3,3) "
                         "stride=(1,1) padding=(1,1) groups=4 bias=False", weights={"weight": weight})
        assert type(model.steps[0].op) is Conv2d
        np.testing.assert_allclose(model(np.ones((1, 4, 6, 6), np.float32))[0, 0, 1:-1, 1:-1], 9.0)
    finally:
        monkeypatch.undo()
        runtime.availability.cache_clear()
        runtime._numba.cache_clear()
        reset_registries()


def test_info_notes_name_the_compiled_paths(tmp_path, conv_engine):
    from conftest import op_model

    from kuiper.numba_kernels import kernel_notes

    weight = np.ones((4, 1, 3, 3), np.float32)
    model = op_model(tmp_path, "nn.Conv2d conv 1 1 x y in_channels=4 out_channels=4 kernel_size=(3,3) "
                     "stride=(1,1) padding=(1,1) groups=4 bias=False", weights={"weight": weight})
    notes = "\n".join(kernel_notes(model))
    assert "compiled CPU kernels: on" in notes
    assert "elementwise ops and chains" in notes
    assert ("oneDNN (its layout" if conv_engine == "onednn" else "depthwise: compiled") in notes
    assert "oneDNN kernels: " in notes


def test_a_bad_parallel_work_setting_is_a_config_error(monkeypatch):
    from kuiper.errors import ConfigError

    monkeypatch.setenv("KUIPER_PARALLEL_WORK", "lots")
    with pytest.raises(ConfigError, match="KUIPER_PARALLEL_WORK='lots'"):
        runtime.work_threshold("KUIPER_PARALLEL_WORK", 5)
    monkeypatch.setenv("KUIPER_PARALLEL_WORK", "0")
    assert runtime.work_threshold("KUIPER_PARALLEL_WORK", 5) == 0
    monkeypatch.delenv("KUIPER_PARALLEL_WORK")
    assert runtime.work_threshold("KUIPER_PARALLEL_WORK", 5) == 5


def test_the_kernels_share_onednns_openmp_pool_when_it_is_gnus_and_keep_numbas_own_otherwise(monkeypatch):
    from kuiper import onednn

    monkeypatch.setattr(onednn, "on_gnu_openmp", lambda: True)
    layer, priority = runtime.threading_layer_choice()
    assert layer == "default" and priority[:2] == ["omp", "workqueue"]  # numba's own pool where OpenMP's fails to load
    monkeypatch.setattr(onednn, "on_gnu_openmp", lambda: False)
    assert runtime.threading_layer_choice()[0] == "workqueue"


def test_blas_keeps_to_the_calling_thread_exactly_when_onednn_owns_the_cores(monkeypatch):
    from kuiper import onednn

    monkeypatch.setattr(onednn, "library", lambda: object())
    assert runtime.blas_threads(lambda: None) == 1
    monkeypatch.setattr(onednn, "library", lambda: None)
    assert runtime.blas_threads(lambda: 7) == 7  # the backend's own answer


def test_a_fresh_process_launches_its_kernels_on_the_layer_chosen_for_it():
    """numba fixes its layer at the first parallel launch, so this needs a process of its own."""
    from kuiper import onednn

    script = ("import numpy as np\n"
              "from kuiper.numba_kernels import runtime\n"
              "numba = runtime._numba()\n"
              "@numba.njit(parallel=True)\n"
              "def fill(a):\n"
              "    for i in numba.prange(a.size):\n"
              "        a[i] = i\n"
              "fill(np.zeros(64))\n"
              "print(numba.threading_layer())\n")
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    layer = done.stdout.split()[-1]
    assert layer == ("omp" if onednn.on_gnu_openmp() else "workqueue")
