"""``compile(kernel, backend=None) -> f(**arrays) -> {output: array}`` on any kuiper backend.

On the CuPy backend the kernel runs as the generated CUDA (kuiper.ir.codegen_cpp.cuda_source,
one launch per loop nest); on every other backend through its array namespace, vectorised
(kuiper.te.execute).
"""

from __future__ import annotations

import numpy

from kuiper.backends.base import CUDA_SOURCE
from kuiper.errors import InputError, ShapeError
from kuiper.ir.codegen_cpp import BLOCK_SIZE, cuda_source
from kuiper.limits import check_size
from kuiper.te.execute import plan, run_plan, working_points
from kuiper.te.kernel import Kernel
from kuiper.te.lower import lower, nests


class CompiledKernel:
    def __init__(self, kernel: Kernel, backend=None):
        from kuiper.backends import get_backend

        self.kernel = kernel
        self.backend = backend if hasattr(backend, "xp") else get_backend(backend)
        self.plans = [plan(nest) for nest in nests(kernel)]
        check_memory(kernel, self.plans)
        self.cuda = _CudaKernels(kernel) if CUDA_SOURCE in self.backend.capabilities else None

    def __call__(self, **arrays) -> dict:
        kernel, backend, xp = self.kernel, self.backend, self.backend.xp
        missing = [name for name in kernel.inputs if name not in arrays]
        unknown = [name for name in arrays if name not in kernel.inputs]
        if missing or unknown:
            raise InputError(f"kernel {kernel.name} takes {kernel.inputs}; missing {missing}, unknown {unknown}")
        feeds = {}
        for name in kernel.inputs:
            buffer = kernel.buffers[name]
            array = backend.asarray(arrays[name], dtype=getattr(xp, buffer.dtype))
            if tuple(array.shape) != buffer.shape:
                raise ShapeError(
                    f"kernel {kernel.name}: input {name} has shape {tuple(array.shape)}, expected {buffer.shape}"
                )
            feeds[name] = array
        outputs = {
            name: xp.zeros(kernel.buffers[name].shape, dtype=getattr(xp, kernel.buffers[name].dtype))
            for name in kernel.outputs
        }
        if self.cuda is not None:
            self.cuda(feeds, outputs)
            return outputs
        for step in self.plans:
            if step is not None:
                run_plan(step, backend, feeds, outputs[step.target])
        return outputs


class _CudaKernels:
    """The kernel's generated CUDA, compiled once with CuPy's RawModule."""

    def __init__(self, kernel: Kernel):
        import cupy

        self.kernel = kernel
        self.block = BLOCK_SIZE
        # A fixed function name: the kernel's own may be a C++ keyword (legal in te, refused in C++)
        source, self.launches = cuda_source(lower(kernel, name="te_kernel"))
        module = cupy.RawModule(code=source)
        self.functions = [module.get_function(launch.kernel) for launch in self.launches]
        self.cupy = cupy

    def __call__(self, feeds: dict, outputs: dict) -> None:
        args = tuple(self.cupy.ascontiguousarray(feeds[name]) for name in self.kernel.inputs)
        args += tuple(outputs[name] for name in self.kernel.outputs)  # fresh zeros: contiguous
        for function, launch in zip(self.functions, self.launches):
            function((launch.blocks,), (self.block,), args)


def check_memory(kernel: Kernel, plans) -> None:
    """SizeLimitError before any allocation: every tensor, and each statement's largest temporary."""
    for name, buffer in kernel.buffers.items():
        check_size(buffer.shape, numpy.dtype(buffer.dtype).itemsize, f"kernel {kernel.name}: tensor {name}")
    for stmt, step in zip(kernel.statements, plans):
        if step is not None:  # index grids are int64, values at most float64: 8 bytes a point
            check_size((working_points(step),), 8, f"kernel {kernel.name}: working space of '{stmt}'")


def compile(kernel: Kernel, backend=None) -> CompiledKernel:  # noqa: A001 - the public name the issue asks for
    """A callable taking the kernel's inputs by name and returning ``{output name: array}``.

    ``backend`` is a backend name, a Backend, or None (the configured default).  Every
    tensor and the working space of each statement are checked against the memory budget
    (kuiper.limits) first: a SizeLimitError, not an allocation of hundreds of GiB.  Inputs
    are converted to the kernel's dtype and must have its shapes exactly (ShapeError);
    missing or unknown names are an InputError.
    """
    return CompiledKernel(kernel, backend)
