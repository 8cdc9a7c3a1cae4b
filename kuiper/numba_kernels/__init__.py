"""Compiled, multi-threaded CPU kernels (Numba) that replace ops on the NumPy backend.

NumPy threads only its BLAS calls; the gathers, transforms, depthwise taps and
pooling around them ran on one core.  The classes here subclass the reference ops
(same params, same errors, same algorithm choice) and run those loops compiled
with ``prange``, registered for the ``numpy`` backend through ``kuiper_add_kernels``
(see kuiper.backends.numpy_backend).  Without numba, with ``KUIPER_NUMBA=0``, or for
inputs a kernel does not take, the reference ops run unchanged; ``describe()`` and
each op's ``kernel_note`` say which path is taken and why.
"""

from __future__ import annotations

from .runtime import availability, available, describe, set_threads

__all__ = ["availability", "available", "describe", "kernel_notes", "kernels", "set_threads"]


def kernels() -> dict[str, type]:
    """{op type: compiled op class} when numba is available, else {}."""
    if not availability()[0]:
        return {}
    from . import conv, norm, pooling

    return {op_type: cls for module in (conv, pooling, norm) for cls in module.KERNELS for op_type in cls.types}


def kernel_notes(model) -> list[str]:
    """Lines for ``kuiper info``: whether the kernels are on, and the path each replaced op takes."""
    lines = [describe()]
    if availability()[0]:
        lines.append("  elementwise ops and chains of them, softmax over the last dim: compiled (float32)")
    for step in model.steps:
        note = getattr(step.op, "kernel_note", None)
        if note:
            lines.append(f"  {step.node.name:<28} {step.node.type:<18} {note}")
    return lines
