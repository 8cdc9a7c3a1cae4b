"""Compile CUDA C++ source without a GPU, to check generated kernels.

NVRTC (the runtime compiler library) is loaded with ctypes, from the first
place that has it:

1. ``$KUIPER_NVRTC`` (a path to libnvrtc.so*);
2. the NVIDIA pip wheels (``pip install nvidia-cuda-nvrtc``, or the older
   ``nvidia-cuda-nvrtc-cu12``), found under the ``nvidia`` namespace package;
3. the system loader (``ctypes.util.find_library("nvrtc")``);
4. ``$CUDA_HOME``/``$CUDA_PATH`` and /usr/local/cuda*/ lib64 directories.

Without NVRTC, ``nvcc`` on PATH (or in those CUDA directories) is used.
``check_compiles`` raises CompilerUnavailable, with what was tried, when
neither exists, so tests can skip with that reason.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_ARCH = "compute_90"


class CompilerUnavailable(RuntimeError):
    """Neither NVRTC nor nvcc could be found."""


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    log: str
    compiler: str  # "nvrtc <version> (<path>)" or "nvcc (<path>)"


def check_compiles(source: str, arch: str = DEFAULT_ARCH, name: str = "kernel.cu") -> CompileResult:
    """Compile ``source`` to PTX with NVRTC, or else nvcc; the result says whether it compiled."""
    library = load_nvrtc()
    if library is not None:
        return _compile_nvrtc(library, source, arch, name)
    nvcc = find_nvcc()
    if nvcc is not None:
        return _compile_nvcc(nvcc, source, arch, name)
    raise CompilerUnavailable(f"no CUDA compiler: {unavailable_reason()}")


def cuda_include_dirs() -> list[str]:
    """Directories holding the CUDA headers (cuda_fp16.h), if any are installed."""
    found = []
    for root in _cuda_roots():
        include = os.path.join(root, "include")
        if os.path.exists(os.path.join(include, "cuda_fp16.h")):
            found.append(include)
    for package_dir in _nvidia_package_dirs():
        found += [os.path.dirname(h) for h in glob.glob(os.path.join(package_dir, "*", "include", "cuda_fp16.h"))]
    return list(dict.fromkeys(found))


# --- NVRTC ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Nvrtc:
    lib: ctypes.CDLL
    path: str
    version: str


@lru_cache(maxsize=1)
def load_nvrtc() -> _Nvrtc | None:
    for path in _nvrtc_candidates():
        try:
            lib = ctypes.CDLL(path)
            major, minor = ctypes.c_int(), ctypes.c_int()
            if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
                continue
        except OSError:
            continue
        return _Nvrtc(lib, path, f"{major.value}.{minor.value}")
    return None


def _nvrtc_candidates() -> list[str]:
    candidates = []
    if os.environ.get("KUIPER_NVRTC"):
        candidates.append(os.environ["KUIPER_NVRTC"])
    for package_dir in _nvidia_package_dirs():
        candidates += sorted(glob.glob(os.path.join(package_dir, "*", "lib", "libnvrtc.so*")), reverse=True)
    system = ctypes.util.find_library("nvrtc")
    if system:
        candidates.append(system)
    for root in _cuda_roots():
        candidates += sorted(glob.glob(os.path.join(root, "lib*", "libnvrtc.so*")), reverse=True)
    return [c for c in candidates if "builtins" not in os.path.basename(c)]


def _compile_nvrtc(nvrtc: _Nvrtc, source: str, arch: str, name: str) -> CompileResult:
    lib = nvrtc.lib
    program = ctypes.c_void_p()
    status = lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0, None, None)
    if status != 0:
        return CompileResult(False, f"nvrtcCreateProgram failed with status {status}", _describe(nvrtc))
    try:
        options = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        options += [f"--include-path={d}".encode() for d in cuda_include_dirs()]
        option_array = (ctypes.c_char_p * len(options))(*options)
        status = lib.nvrtcCompileProgram(program, len(options), option_array)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        return CompileResult(status == 0, log.value.decode(errors="replace"), _describe(nvrtc))
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _describe(nvrtc: _Nvrtc) -> str:
    return f"nvrtc {nvrtc.version} ({nvrtc.path})"


# --- nvcc -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in _cuda_roots():
        candidate = os.path.join(root, "bin", "nvcc")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _compile_nvcc(nvcc: str, source: str, arch: str, name: str) -> CompileResult:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(source)
        command = [nvcc, "--ptx", f"--gpu-architecture={arch}", "-std=c++17", "-o", os.devnull, path]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    return CompileResult(done.returncode == 0, done.stdout + done.stderr, f"nvcc ({nvcc})")


# --- where CUDA may live -------------------------------------------------------------


def unavailable_reason() -> str:
    return (
        "libnvrtc not found ($KUIPER_NVRTC, pip wheel nvidia-cuda-nvrtc, system loader, "
        "$CUDA_HOME, /usr/local/cuda*) and no nvcc on PATH"
    )


def _cuda_roots() -> list[str]:
    roots = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    roots += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]


def _nvidia_package_dirs() -> list[str]:
    try:
        import nvidia  # namespace package of the NVIDIA wheels
    except ImportError:
        return []
    return list(getattr(nvidia, "__path__", []))
