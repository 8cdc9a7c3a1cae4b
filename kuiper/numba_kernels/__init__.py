"""Compiled, multi-threaded CPU kernels (Numba): a plugin of kuiper's own, registered as a third party's is.

NumPy threads only its BLAS calls; the gathers, transforms, depthwise taps and
pooling around them ran on one core.  The classes here subclass the reference ops
(same params, same errors, same algorithm choice) and run those loops compiled
with ``prange``.  This package is the plugin (entry point ``numba_kernels`` in the
``kuiper`` group): for every backend whose arrays are NumPy arrays (capability
``numpy-arrays``) it replaces those ops (``kuiper_add_kernels``) and the
``softmax_in_place`` and ``compile_elementwise`` primitives (``kuiper_add_primitives``).
Without numba, with ``KUIPER_NUMBA=0``, or for inputs a kernel does not take, the
reference ops run unchanged; ``describe()`` and each op's ``kernel_note`` say which
path is taken and why.
"""

from __future__ import annotations

from .. import onednn
from ..backends.base import NUMPY_ARRAYS
from ..hookspecs import hookimpl
from .runtime import availability, available, describe, set_threads

__all__ = ["availability", "available", "describe", "kernel_notes", "kernels", "set_threads"]


def _compiled():
    """The module holding the compiled classes and primitives.

    Imported here, on first need, and nowhere else: it imports every op class of the
    plugin, which a process that builds no NumPy-array model never needs; and this module
    is loaded at every plugin discovery.
    """
    from . import compiled

    return compiled


def kernels() -> dict[str, type]:
    """{op type: compiled op class} when numba is available, else {}."""
    return dict(_compiled().KERNELS) if available() else {}


@hookimpl
def kuiper_add_kernels(capabilities):
    """The compiled op classes, for backends whose arrays are NumPy arrays."""
    return kernels() if NUMPY_ARRAYS in capabilities else None


@hookimpl
def kuiper_add_primitives(capabilities):
    """Compiled softmax and elementwise math, for backends whose arrays are NumPy arrays."""
    if NUMPY_ARRAYS not in capabilities or not available():
        return None
    return dict(_compiled().PRIMITIVES)


@hookimpl
def kuiper_add_providers(capabilities):
    """The compiled dense-chain provider (dense_chain.py), for backends whose arrays are NumPy arrays."""
    if NUMPY_ARRAYS not in capabilities or not available():
        return None
    return dict(_compiled().PROVIDERS)


def kernel_notes(model) -> list[str]:
    """Lines for ``kuiper info``: whether the kernels are on, and the path each replaced op takes."""
    lines = [describe(), onednn.describe()]
    if available():
        lines.append("  elementwise ops and chains of them, softmax over the last dim: compiled (float32)")
    for step in model.steps:
        note = getattr(step.op, "kernel_note", None)
        if note and step.op.output_layout:
            note = f"{note}; output kept in the {step.op.output_layout} layout"
        if note:
            lines.append(f"  {step.node.name:<28} {step.node.type:<18} {note}")
    return lines
