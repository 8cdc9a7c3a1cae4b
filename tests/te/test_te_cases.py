"""The ten course cases and kuiper's own: forward results and gradients against PyTorch
fixtures (tools/make_te_fixtures.py), finite differences in float64, and the emitted C++
and CUDA (emulated on the host) compiled with g++ and run: one translation unit, one g++ call."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kuiper.te as te
from kuiper.ir import Var
from kuiper.ir.codegen_cpp import BLOCK_SIZE, cpp_source, cuda_source
from kuiper.testing import backend_params

FIXTURES = Path(__file__).parents[1] / "fixtures" / "te"
CASES = {case["name"]: case for case in json.loads((FIXTURES / "cases.json").read_text())}
NAMES = list(CASES)


def kernels(name: str, dtype: str = "float64"):
    case = CASES[name]
    forward = te.parse(case["kernel"], dtype=dtype, inputs=case["ins"], outputs=case["outs"])
    return forward, te.grad(forward, case["grad_to"], name=case["name"])


def reference(name: str) -> dict:
    with np.load(FIXTURES / f"{name}.npz") as data:
        return dict(data)


def grad_feeds(gradient, ref: dict, dtype=np.float64) -> dict:
    return {
        name: (ref[name] if name.startswith("d") and name in ref else ref[f"in_{name}"]).astype(dtype)
        for name in gradient.inputs
    }


@pytest.mark.parametrize("name", NAMES)
def test_forward_and_gradient_match_pytorch(name):
    forward, gradient = kernels(name)
    ref = reference(name)
    outputs = te.compile(forward, "numpy")(**{x: ref[f"in_{x}"] for x in forward.inputs})
    for out in forward.outputs:
        np.testing.assert_allclose(outputs[out], ref[f"out_{out}"], rtol=1e-12, atol=1e-12)
    grads = te.compile(gradient, "numpy")(**grad_feeds(gradient, ref))
    for x in CASES[name]["grad_to"]:
        np.testing.assert_allclose(grads[f"d{x}"], ref[f"grad_{x}"], rtol=1e-12, atol=1e-12)


def _cuda_backends() -> list:
    """Backends that compile and launch te's generated CUDA (CuPy on a GPU); each unavailable one skips."""
    from kuiper.backends.base import CUDA_SOURCE
    from kuiper.plugins import backend_capabilities

    return [param for param in backend_params() if CUDA_SOURCE in backend_capabilities(param.values[0])]


@pytest.mark.parametrize("backend", _cuda_backends())
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-10), ("float32", 1e-4)])
@pytest.mark.parametrize("name", NAMES)
def test_generated_cuda_on_the_gpu_matches_pytorch(name, dtype, tolerance, backend):
    from kuiper.backends import get_backend

    host = get_backend(backend).to_numpy
    forward, gradient = kernels(name, dtype)
    ref = reference(name)
    outputs = te.compile(forward, backend)(**{x: ref[f"in_{x}"] for x in forward.inputs})
    for out in forward.outputs:
        np.testing.assert_allclose(host(outputs[out]), ref[f"out_{out}"], rtol=tolerance, atol=tolerance)
    grads = te.compile(gradient, backend)(**grad_feeds(gradient, ref))
    for x in CASES[name]["grad_to"]:
        np.testing.assert_allclose(host(grads[f"d{x}"]), ref[f"grad_{x}"], rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences(name):
    forward, gradient = kernels(name)
    ref = reference(name)
    inputs = {x: ref[f"in_{x}"] for x in forward.inputs}
    douts = {out: ref[f"d{out}"] for out in forward.outputs}
    run = te.compile(forward, "numpy")

    def loss(values):
        outputs = run(**values)
        return sum(float(np.sum(outputs[out] * douts[out])) for out in forward.outputs)

    grads = te.compile(gradient, "numpy")(**grad_feeds(gradient, ref))
    rng = np.random.default_rng(7)
    step = 1e-6
    for x in CASES[name]["grad_to"]:
        direction = rng.standard_normal(inputs[x].shape)
        plus = loss({**inputs, x: inputs[x] + step * direction})
        minus = loss({**inputs, x: inputs[x] - step * direction})
        numeric = (plus - minus) / (2 * step)
        analytic = float(np.sum(grads[f"d{x}"] * direction))
        assert abs(numeric - analytic) <= 1e-6 * max(1.0, abs(analytic)), (x, numeric, analytic)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_kernel_is_plain_and_prints_back(name):
    _, gradient = kernels(name, "float32")
    for stmt in gradient.statements:
        assert all(isinstance(index, Var) for index in stmt.target.indices), str(stmt)
    again = te.parse(str(gradient), inputs=gradient.inputs, outputs=gradient.outputs, name=gradient.name)
    assert again == gradient


def test_course_argument_order():
    # run2.h: inputs the gradient reads (ins order), then d<out> per output, then d<x> per grad_to.
    _, case4 = kernels("grad_case4")
    assert case4.inputs + case4.outputs == ["B", "C", "dA", "dB", "dC"]
    _, case1 = kernels("grad_case1")
    assert case1.inputs + case1.outputs == ["B", "dC", "dA"]
    _, case7 = kernels("grad_case7")
    assert case7.inputs + case7.outputs == ["dB", "dA"]


def test_case10_gradient_text():
    # Worked by hand: each shifted read B[i + c, j] gives dB[i0, j] += dA[i0 - c, j] / 3 over i0 in [c, c + 8).
    _, gradient = kernels("grad_case10", "float32")
    assert str(gradient).splitlines() == [
        "dB<10, 8>[i, j] += dA<8, 8>[i, j] / 3.0 where i < 8;",
        "dB<10, 8>[i0, j] += dA<8, 8>[i, j] / 3.0 where i = i0 - 1;",
        "dB<10, 8>[i0, j] += dA<8, 8>[i, j] / 3.0 where i = i0 - 2;",
    ]
    source = te.emit(gradient, "c++", name="grad_case10")
    # tensors are emitted as u_<name>, index variables as v_<name> (kuiper.ir.identifiers)
    assert "void grad_case10(float (&u_dA)[8][8], float (&u_dB)[10][8])" in source
    assert "for (long long v_i0 = 1; v_i0 < 9; ++v_i0)" in source  # the range guard became a loop bound
    assert "u_dB[v_z0][v_z1] = 0.0f;" in source  # outputs zero-initialised


HOST_CUDA = """
// CUDA kernels run on the host: every thread of every launch, in order.
#define __global__
#define __device__
using namespace std;  // exp(float) and friends resolve to the float overloads, as in CUDA
struct KuiperDim3 { unsigned x; };
static KuiperDim3 blockIdx, blockDim, threadIdx;
"""


def _harness(gradients, launches) -> str:
    """main(): read every kernel's inputs from stdin, run its C++ and its host-emulated CUDA, write the outputs."""
    lines = ["#include <cstdio>", '#include "run2.h"']
    for number in range(1, 11):  # a definition that differs from run2.h would overload it: decltype fails
        lines.append(f"using course_signature_{number} = decltype(&grad_case{number});")
    body = []
    for gradient, kernel_launches in zip(gradients, launches):
        for name in gradient.inputs + gradient.outputs:
            dims = "".join(f"[{d}]" for d in gradient.shapes[name])
            lines.append(f"static float {gradient.name}_{name}{dims};")
        for name in gradient.inputs:
            body.append(
                f"  if (std::fread(&{gradient.name}_{name}, sizeof {gradient.name}_{name}, 1, stdin) != 1) return 1;"
            )
        args = ", ".join(f"{gradient.name}_{n}" for n in gradient.inputs + gradient.outputs)
        body.append(f"  {gradient.name}({args});")
        for name in gradient.outputs:
            body.append(f"  std::fwrite(&{gradient.name}_{name}, sizeof {gradient.name}_{name}, 1, stdout);")
        for name in gradient.outputs:  # garbage in, so that the CUDA zero-fill is tested too
            body.append(f"  std::memset(&{gradient.name}_{name}, 0x7f, sizeof {gradient.name}_{name});")
        for launch in kernel_launches:
            body.append(f"  for (unsigned t = 0; t < {launch.blocks * BLOCK_SIZE}u; ++t) {{")
            body.append(
                f"    blockDim.x = {BLOCK_SIZE}; blockIdx.x = t / {BLOCK_SIZE}; threadIdx.x = t % {BLOCK_SIZE};"
            )
            body.append(f"    {launch.kernel}({args});")
            body.append("  }")
        for name in gradient.outputs:
            body.append(f"  std::fwrite(&{gradient.name}_{name}, sizeof {gradient.name}_{name}, 1, stdout);")
    return "\n".join([*lines, "int main() {", *body, "  return 0;", "}", ""])


def test_emitted_cpp_and_cuda_compile_and_match(tmp_path):
    """C++ against run2.h with g++ -O2 -std=c++17, and the CUDA kernels emulated on the host: one g++ call."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    gradients = [kernels(name, "float32")[1] for name in NAMES]
    functions = [te.lower(g) for g in gradients]
    cuda = [cuda_source(fn) for fn in functions]
    source = "\n".join(
        [
            "#include <cstring>",
            cpp_source(functions),
            HOST_CUDA,
            *(text for text, _ in cuda),
            _harness(gradients, [launches for _, launches in cuda]),
        ]
    )
    (tmp_path / "kernels.cc").write_text(source)
    shutil.copy(FIXTURES / "run2.h", tmp_path / "run2.h")
    binary = tmp_path / "kernels"
    build = subprocess.run(
        [compiler, "-O2", "-std=c++17", "-Wall", "-Werror", "-o", str(binary), str(tmp_path / "kernels.cc")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    feeds = [grad_feeds(g, reference(g.name), np.float32) for g in gradients]
    stdin = b"".join(feed[name].tobytes() for g, feed in zip(gradients, feeds) for name in g.inputs)
    stdout = subprocess.run([str(binary)], input=stdin, capture_output=True, check=True).stdout
    offset = 0
    for gradient, feed in zip(gradients, feeds):
        expected = te.compile(gradient, "numpy")(**feed)
        for language in ("c++", "cuda"):
            for name in gradient.outputs:
                count = int(np.prod(gradient.shapes[name]))
                got = np.frombuffer(stdout, np.float32, count, offset).reshape(gradient.shapes[name])
                offset += 4 * count
                message = f"{language} {gradient.name} {name}"
                np.testing.assert_allclose(got, expected[name], rtol=2e-5, atol=2e-5, err_msg=message)
                # and against PyTorch's float64 gradient, to float32 accuracy
                torch_grad = reference(gradient.name)[f"grad_{name[1:]}"]
                np.testing.assert_allclose(got, torch_grad, rtol=1e-4, atol=1e-4, err_msg=message)
    assert offset == len(stdout)


def test_cuda_source_compiles_with_nvrtc():
    from kuiper.ir.nvrtc import CompilerUnavailable, check_compiles, unavailable_reason

    sources = [cuda_source(te.lower(kernels(name, "float32")[1]))[0] for name in NAMES]
    try:
        result = check_compiles("\n".join(sources))
    except CompilerUnavailable:
        pytest.skip(f"no CUDA compiler: {unavailable_reason()}")
    assert result.ok, result.log[:3000]


def test_emitted_numpy_source_computes_the_same(tmp_path, monkeypatch):
    # Written to a module file and imported: what a user of emit(..., "numpy") would do.
    gradients = [kernels(name, "float32")[1] for name in NAMES]
    source = "".join(te.emit(g, "numpy", name=g.name) for g in gradients)
    (tmp_path / "te_emitted.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("te_emitted")
    for gradient in gradients:
        feed = grad_feeds(gradient, reference(gradient.name), np.float32)
        got = getattr(module, gradient.name)(*(feed[name] for name in gradient.inputs))
        expected = te.compile(gradient, "numpy")(**feed)
        for name in gradient.outputs:
            assert got[name].dtype == np.float32
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-6, atol=1e-6, err_msg=gradient.name)
