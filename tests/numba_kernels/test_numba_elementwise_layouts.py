"""Where fused elementwise math runs for broadcast and permuted inputs (kuiper/numba_kernels/elementwise.py,
kuiper/ir/codegen_numpy.py): the interpreter streams only dense inputs (a broadcast one costs a
copy), and NumPy's buffers follow a permuted input's layout.  Same values either way: checked
against float64."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kuiper.ir import composites, make
from kuiper.ir.codegen_numpy import compile_elementwise as compile_numpy
from kuiper.numba_kernels import elementwise as compiled
from kuiper.ops.elementwise import ElementwiseMath, function_for


def _compiled(build, arity):
    function = function_for(ElementwiseMath(build, arity), ("float32",) * arity)
    return compiled.CompiledElementwise(function), compile_numpy(function)


def batch_norm_relu(x, mean, scale, shift):
    return make.maximum(make.add(make.mul(make.sub(x, mean), scale), shift), make.const(0.0, "float32"))


def _activation_and_channel_vectors(shape=(2, 24, 20, 16)):
    """An NHWC view of NCHW data (what a conv's output transpose gives) and three per-channel vectors
    broadcast over it (views with strides of 0)."""
    rng = np.random.default_rng(0)
    nchw = rng.standard_normal((shape[0], shape[3], shape[1], shape[2])).astype(np.float32)
    x = nchw.transpose(0, 2, 3, 1)
    vectors = [np.broadcast_to(rng.standard_normal(shape[3]).astype(np.float32), shape) for _ in range(3)]
    return x, vectors


def test_three_broadcast_inputs_of_a_four_pass_program_run_on_numpy_with_the_same_values():
    run, _ = _compiled(batch_norm_relu, 4)
    x, (mean, scale, shift) = _activation_and_channel_vectors()
    got = run(x, mean, scale, shift)
    assert run.last_path == "numpy"  # copying three broadcasts costs more than NumPy's four passes
    want = np.maximum((x.astype(np.float64) - mean) * scale + shift, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_long_program_with_one_broadcast_input_stays_on_the_interpreter():
    run, _ = _compiled(lambda x, b: composites.gelu(make.add(x, b)), 2)  # a bias + GELU: many passes
    x, (bias, _, _) = _activation_and_channel_vectors()
    x = np.ascontiguousarray(x)
    got = run(x, bias)
    assert run.last_path in ("serial", "parallel")
    _, reference = _compiled(lambda x, b: composites.gelu(make.add(x, b)), 2)
    np.testing.assert_allclose(got, reference(x, bias), rtol=2e-6, atol=2e-6)


def test_numpys_buffers_follow_a_permuted_inputs_layout():
    _, run = _compiled(batch_norm_relu, 4)  # the NumPy evaluation itself
    x, (mean, scale, shift) = _activation_and_channel_vectors()
    got = run(x, mean, scale, shift)
    assert not got.flags.c_contiguous and np.transpose(got, (0, 3, 1, 2)).flags.c_contiguous  # laid out as x
    want = np.maximum((x.astype(np.float64) - mean) * scale + shift, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    dense = np.ascontiguousarray(x)
    row_major = run(dense, mean, scale, shift)
    assert row_major.flags.c_contiguous  # a row-major input keeps row-major buffers
    np.testing.assert_array_equal(row_major, got)
