"""``emit(kernel, "c++" | "cuda" | "numpy", name=...)``: source code for a kernel."""

from __future__ import annotations

from kuiper.errors import TESyntaxError
from kuiper.ir import codegen_cpp
from kuiper.ir.identifiers import function_name_problem
from kuiper.te.kernel import Kernel
from kuiper.te.lower import lower
from kuiper.te.numpy_source import numpy_source


def emit(kernel: Kernel, language: str = "c++", name: str | None = None) -> str:
    """Source of ``kernel`` as a function ``name`` (default: the kernel's); tensors are named ``u_<name>``."""
    name = kernel.name if name is None else name
    problem = function_name_problem(name)
    if problem is not None:
        raise TESyntaxError(f"kernel name {problem}, so it cannot name the emitted function")
    fn = lower(kernel, name)
    if language in ("c++", "cpp"):
        return codegen_cpp.cpp_source([fn])
    if language == "cuda":
        return codegen_cpp.cuda_source(fn)[0]
    if language == "numpy":
        return numpy_source(kernel, name)
    raise TESyntaxError(f"unknown target language {language!r}: expected 'c++', 'cuda' or 'numpy'")
