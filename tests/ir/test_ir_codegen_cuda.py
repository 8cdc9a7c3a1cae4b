"""The CUDA code generator: kernel specs, NVRTC compilation of every function, host emulation.

No GPU is needed.  Every function is lowered for every dtype it accepts and
compiled in one translation unit with NVRTC (pip wheel nvidia-cuda-nvrtc) or
nvcc; tests skip, saying why, when neither is installed.  The same kernel
bodies are also compiled as plain C++ with the host compiler and run on the
CPU, and must agree with the NumPy code generator: that checks the semantics
of the emitted code (Python rounding, NaN-propagating max, casts ...).
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from kuiper.errors import ExpressionSyntaxError, IRError
from kuiper.pnnx_expr import FUNCTIONS, hoist_sizes, parse
from kuiper.pnnx_expr.lower import lower
from kuiper.ir import simplify
from kuiper.ir.codegen_cuda import KernelSpec, cuda_module_source, cuda_source, elementwise_kernel_spec
from kuiper.ir.codegen_numpy import compile_elementwise
from kuiper.ir.nvrtc import CompilerUnavailable, check_compiles, unavailable_reason
from kuiper.ir.render_c import DEVICE_HELPERS, c_literal

DTYPES = ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def function_for(text, *input_dtypes):
    return simplify(lower(parse(text), list(input_dtypes)))


def spec(text, *input_dtypes) -> KernelSpec:
    return elementwise_kernel_spec(function_for(text, *input_dtypes))


def call_text(name):
    return f"{name}({','.join(f'@{i}' for i in range(FUNCTIONS[name].arity))})"


def every_function_and_dtype():
    """(text, dtypes, fn) for each function and each dtype PyTorch accepts it for."""
    cases = []
    for name in sorted(FUNCTIONS):
        arity = FUNCTIONS[name].arity
        for dtype in DTYPES:
            try:
                fn = function_for(call_text(name), *[dtype] * arity)
            except ExpressionSyntaxError:
                continue  # e.g. sub of bools, lshift of floats: rejected like PyTorch does
            cases.append((call_text(name), dtype, fn))
    return cases


CASES = every_function_and_dtype()


# --- kernel specs -------------------------------------------------------------------------


def test_spec_pieces():
    result = spec("add(mul(@0,@1),1)", "float32", "float32")
    assert result.in_params == "float32 x0, float32 x1"
    assert result.out_params == "float32 out"
    assert result.operation == "float t0 = (x0 * x1);\nfloat t1 = (t0 + 1.0f);\nout = t1;"
    assert result.name.startswith("kuiper_ew_") and result.name.isidentifier()
    assert result.preamble == DEVICE_HELPERS
    assert set(result.elementwise_kernel_args()) == {"in_params", "out_params", "operation", "name", "preamble"}


def test_specs_are_cached_and_named_by_content():
    fn = function_for("exp(@0)", "float32")
    assert elementwise_kernel_spec(fn) is elementwise_kernel_spec(function_for("exp(@0)", "float32"))
    assert spec("exp(@0)", "float32").name != spec("exp(@0)", "float64").name


@pytest.mark.parametrize(
    "text, dtypes, fragment",
    [
        ("exp(@0)", ["float32"], "expf(x0)"),
        ("exp(@0)", ["float64"], "exp(x0)"),
        ("erf(@0)", ["float32"], "erff(x0)"),
        ("log1p(@0)", ["float64"], "log1p(x0)"),
        ("round(@0)", ["float32"], "rintf(x0)"),  # half to even
        ("abs(@0)", ["float32"], "fabsf(x0)"),
        ("abs(@0)", ["int32"], "kuiper_abs_int(x0)"),
        ("floor_divide(@0,@1)", ["float32", "float32"], "kuiper_floordiv_float(x0, x1)"),
        ("floor_divide(@0,@1)", ["int64", "int64"], "kuiper_floordiv_int(x0, x1)"),
        ("remainder(@0,@1)", ["float64", "float64"], "kuiper_remainder_float(x0, x1)"),
        ("remainder(@0,@1)", ["int32", "int32"], "kuiper_remainder_int(x0, x1)"),
        ("fmod(@0,@1)", ["float32", "float32"], "fmodf(x0, x1)"),
        ("fmod(@0,@1)", ["int64", "int64"], "kuiper_fmod_int(x0, x1)"),
        ("pow(@0,@1)", ["int64", "int64"], "kuiper_pow_int(x0, x1)"),
        ("pow(@0,@1)", ["float32", "float32"], "powf(x0, x1)"),
        ("max(@0,@1)", ["float32", "float32"], "kuiper_max(x0, x1)"),  # NaN-propagating
        ("div(@0,@1)", ["int64", "int64"], "float t0 = static_cast<float>(x0);"),
        ("mul(@0,0.5)", ["int32"], "(t0 * 0.5f)"),
        ("where(@0,@1,@2)", ["bool", "float32", "float32"], "(x0 ? x1 : x2)"),
        ("gt(@0,@1)", ["int32", "int32"], "bool t0 = (x0 > x1);"),
        ("add(@0,@1)", ["float16", "float16"], "(static_cast<float>(x0) + static_cast<float>(x1))"),
        ("add(@0,@1)", ["float16", "float16"], "out = float16(t0);"),
        ("add(@0,1)", ["int8"], "((signed char)1)"),
        ("sub(@0,-1)", ["int64"], "(x0 - (-1LL))"),
    ],
)
def test_emitted_code(text, dtypes, fragment):
    assert fragment in spec(text, *dtypes).operation


def test_python_scalars_become_kernel_arguments():
    assert spec("mul(@0,@1)", "float32", "pyfloat").in_params == "float32 x0, float64 x1"
    assert spec("add(@0,@1)", "int32", "pyint").in_params == "int32 x0, int64 x1"
    assert spec("where(@1,@0,0)", "float32", "pybool").in_params == "float32 x0, bool x1"


def test_sizes_must_be_hoisted_into_scalar_inputs():
    with pytest.raises(IRError, match="hoist"):
        spec("mul(@0,size(@0,1))", "float32")
    expr, hoisted = hoist_sizes(parse("mul(@0,size(@0,1))"), num_inputs=1)
    assert hoisted == ((0, 1),)
    hoisted_spec = elementwise_kernel_spec(simplify(lower(expr, ["float32", "pyint"])))
    assert hoisted_spec.in_params == "float32 x0, int64 x1"


def test_non_elementwise_results_are_refused():
    with pytest.raises(IRError, match="list"):
        spec("[size(@0,0),-1]", "float32")
    with pytest.raises(IRError, match="Python"):
        spec("add(@0,1)", "pyint")


@pytest.mark.parametrize(
    "value, dtype, text",
    [
        (math.inf, "float32", "__int_as_float(0x7f800000)"),
        (-math.inf, "float32", "__int_as_float((int)0xff800000)"),
        (math.nan, "float32", "__int_as_float(0x7fffffff)"),
        (math.inf, "float64", "__longlong_as_double(0x7ff0000000000000LL)"),
        (math.nan, "pyfloat", "__longlong_as_double(0x7ff8000000000000LL)"),
        (1e-05, "float32", "1e-05f"),
        (0.5, "float64", "0.5"),
        (-(2**63), "int64", "(-9223372036854775807LL - 1)"),
        (-(2**31), "int32", "(-2147483647 - 1)"),
        (7, "pyint", "7LL"),
        (True, "bool", "true"),
        (3, "uint8", "((unsigned char)3)"),
    ],
)
def test_c_literals(value, dtype, text):
    assert c_literal(value, dtype) == text


def test_standalone_source_shape():
    source = cuda_source(function_for("add(exp(@0),@1)", "float32", "pyfloat"))
    assert 'extern "C" __global__ void kuiper_ew_' in source
    assert "const float* __restrict__ x0_ptr, const double x1, float* __restrict__ out_ptr, const long long n" in source
    assert "if (i >= n) return;" in source
    assert "const float x0 = x0_ptr[i];" in source
    assert "out_ptr[i] = out;" in source
    assert "#include" not in source  # NVRTC has no headers unless float16 needs one
    assert "#include <cuda_fp16.h>" in cuda_source(function_for("neg(@0)", "float16"))


def test_every_function_has_cases():
    assert {text.split("(")[0] for text, _, _ in CASES} == set(FUNCTIONS)


# --- NVRTC / nvcc ----------------------------------------------------------------------------


def _compile_or_skip(source):
    try:
        return check_compiles(source)
    except CompilerUnavailable:
        pytest.skip(f"no CUDA compiler: {unavailable_reason()}")


def test_every_function_and_dtype_compiles_with_nvrtc():
    functions = [fn for _, dtype, fn in CASES if dtype != "float16"]
    result = _compile_or_skip(cuda_module_source(functions))
    if not result.ok:  # find the culprits, for a readable failure
        failing = [str(fn) for fn in functions if not check_compiles(cuda_source(fn)).ok]
        pytest.fail(f"{result.compiler} rejected {len(failing)} kernels:\n{result.log[:3000]}\n{failing[:5]}")


def test_float16_kernels_compile_when_cuda_headers_exist():
    from kuiper.ir.nvrtc import cuda_include_dirs, find_nvcc, load_nvrtc

    if load_nvrtc() is not None and not cuda_include_dirs():
        pytest.skip("NVRTC found, but no CUDA headers (cuda_fp16.h) for float16 kernels")
    functions = [fn for _, dtype, fn in CASES if dtype == "float16"]
    result = _compile_or_skip(cuda_module_source(functions))
    assert result.ok, result.log[:3000]
    assert load_nvrtc() is not None or find_nvcc() is not None


def test_compiler_reports_errors():
    result = _compile_or_skip('extern "C" __global__ void broken() { undefined_thing(); }')
    assert not result.ok
    assert "undefined_thing" in result.log


# --- host emulation: the emitted C++ computes what NumPy computes ------------------------------

HOST_PRELUDE = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
using namespace std;
#define __device__
#define __forceinline__ inline
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, sizeof f); return f; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, sizeof d); return d; }
"""
_HOST_CTYPE = {
    "float32": "float",
    "float64": "double",
    "int64": "long long",
    "int32": "int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int16": "short",
    "bool": "bool",
}
_FORMAT = {"float32": ('"%.9g\\n"', "(double)"), "float64": ('"%.17g\\n"', "(double)"), "bool": ('"%d\\n"', "(int)")}

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 3.0, -7.25, 20.0, 0.3, -0.9, math.inf, -math.inf, math.nan]
FLOATS_B = [1.0, -2.0, 0.0, 3.0, -0.75, 2.0, 2.0, -1.0, 0.5, math.nan, 4.0, 1.5, -0.3, 2.0, 1.0, math.inf, 2.0]
INTS = [-7, 7, -7, 7, 0, 13, -13, 5, -1, 100, 3, 2, -2, 1, 6, -6, 9]
INTS_B = [2, 2, -2, -2, 3, 4, 4, -3, 7, -7, 1, 5, 3, -1, 2, 4, -5]


def _host_data(name, dtype, position):
    if dtype.startswith("float"):
        values = FLOATS if position == 0 else FLOATS_B
        if name == "torch.long":
            values = [v if math.isfinite(v) else 0.0 for v in values]
        return np.array(values, dtype=dtype)
    if dtype == "bool":
        return np.array([v % 3 == 0 for v in (INTS if position == 0 else INTS_B)])
    values = INTS if position == 0 else INTS_B
    if name in ("pow", "lshift", "rshift") and position == 1:
        values = [abs(v) % 5 for v in values]
    if dtype == "uint8":
        values = [abs(v) for v in values]
    return np.array(values, dtype=dtype)


def _host_kernel(index, fn, kernel_spec):
    params = ", ".join(f"const {_HOST_CTYPE[p.dtype]}* {p.name}_ptr" for p in fn.params)
    loads = " ".join(f"const {_HOST_CTYPE[p.dtype]} {p.name} = {p.name}_ptr[i];" for p in fn.params)
    out_type = _HOST_CTYPE[fn.results[0].dtype]
    return (
        f"static void kernel_{index}({params}, {out_type}* out_ptr, long long n) {{\n"
        f"  for (long long i = 0; i < n; ++i) {{ {loads} {out_type} out;\n{kernel_spec.operation}\n"
        f"  out_ptr[i] = out; }}\n}}\n"
    )


def _c_array(name, values, dtype):
    ctype = _HOST_CTYPE[dtype]
    items = []
    for v in values.tolist():
        if isinstance(v, float) and not math.isfinite(v):
            items.append(c_literal(v, dtype))
        elif isinstance(v, bool):
            items.append("true" if v else "false")
        else:
            items.append(repr(v) + ("f" if dtype == "float32" else ""))
    return f"static const {ctype} {name}[] = {{{', '.join(items)}}};"


def _host_cases():
    cases = []
    for text, dtype, fn in CASES:
        if dtype not in _HOST_CTYPE or dtype in ("int16",):
            continue
        name = text.split("(")[0]
        inputs = [_host_data(name, dtype, i) for i in range(len(fn.params))]
        with np.errstate(all="ignore"):
            expected = compile_elementwise(fn)(*inputs)
        cases.append((text, dtype, fn, inputs, expected))
    return cases


def test_emitted_code_computes_like_numpy_on_the_host():
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.skip("no host C++ compiler to run the emitted kernel bodies")
    cases = _host_cases()
    parts = [HOST_PRELUDE, DEVICE_HELPERS]
    main = ["int main() {"]
    for index, (_, _, fn, inputs, _) in enumerate(cases):
        parts.append(_host_kernel(index, fn, elementwise_kernel_spec(fn)))
        out_dtype = fn.results[0].dtype
        fmt, convert = _FORMAT.get(out_dtype, ('"%lld\\n"', "(long long)"))
        arrays = [_c_array(f"in{index}_{k}", values, p.dtype) for k, (values, p) in enumerate(zip(inputs, fn.params))]
        args = ", ".join(f"in{index}_{k}" for k in range(len(inputs)))
        main += [
            "  {",
            *(f"    {a}" for a in arrays),
            f"    static {_HOST_CTYPE[out_dtype]} result[{len(inputs[0])}];",
            f"    kernel_{index}({args}, result, {len(inputs[0])});",
            f"    for (int i = 0; i < {len(inputs[0])}; ++i) printf({fmt}, {convert}result[i]);",
            '    printf("--\\n");',
            "  }",
        ]
    main += ["  return 0;", "}"]
    source = "\n".join(parts + main)
    with tempfile.TemporaryDirectory() as tmp:
        path, binary = f"{tmp}/kernels.cpp", f"{tmp}/kernels"
        with open(path, "w") as f:
            f.write(source)
        command = [compiler, "-O0", "-std=c++17", "-w", path, "-o", binary]
        build = subprocess.run(command, capture_output=True, text=True)
        assert build.returncode == 0, build.stderr[:3000]
        run = subprocess.run([binary], capture_output=True, text=True, check=True)
    outputs = run.stdout.split("--\n")[:-1]
    assert len(outputs) == len(cases)
    mismatches = []
    for (text, dtype, fn, _, expected), output in zip(cases, outputs):
        values = [float(v) for v in output.split()]
        out_dtype = fn.results[0].dtype
        actual = np.array(values, dtype=np.float64)
        wanted = np.asarray(expected).astype(np.float64)
        if out_dtype.startswith("float"):
            ok = np.allclose(actual, wanted, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            ok = np.array_equal(actual, wanted)
        if not ok:
            mismatches.append(f"{text} [{dtype}]: C++ {actual.tolist()} vs NumPy {wanted.tolist()}")
    assert not mismatches, "\n".join(mismatches[:10])
