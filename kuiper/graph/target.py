"""The Target: the backend a graph is built for, resolved once and handed to every pass.

A graph pass needs to know more than a backend's name: which op types a kernel plugin replaces
on it (fusion leaves those alone, or asks the kernel whether it takes an epilogue), which op
class to instantiate for a node, and which providers may claim partitions of the graph.  The
Target answers all of that from lookups made once per build, as TVM's ``Target`` or an ONNX
Runtime execution provider is handed down, so no pass asks the plugin registry again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..backends import get_backend
from ..backends.base import Backend
from ..plugins import Registered, kernel_registry, op_registry, provider_registry


@dataclass(frozen=True)
class Target:
    """One backend with everything plugins registered for it."""

    backend: Backend
    ops: Mapping[str, Registered]  # op type -> the generic op class (kuiper_add_ops)
    kernels: Mapping[str, Registered]  # op type -> the class replacing it on this backend (kuiper_add_kernels)
    providers: tuple  # objects claiming partitions on this backend (kuiper_add_providers), in plugin order

    def knows(self, op_type: str) -> bool:
        """Whether an op class runs ``op_type`` here, generic or a kernel."""
        return op_type in self.kernels or op_type in self.ops

    def op_class(self, op_type: str) -> type:
        """The class that runs ``op_type`` on this backend: the kernel plugin's, else the generic op."""
        registered = self.kernels.get(op_type) or self.ops[op_type]
        return registered.obj

    def overrides(self, op_type: str) -> bool:
        """Whether a kernel plugin replaces ``op_type`` on this backend."""
        return op_type in self.kernels


def resolve_target(backend: str | Backend | Target | None = None) -> Target:
    """The Target of a backend, a backend's name, or None (kuiper.config chooses)."""
    if isinstance(backend, Target):
        return backend
    backend = backend if isinstance(backend, Backend) else get_backend(backend)
    providers = tuple(registered.obj for registered in provider_registry(backend.name).values())
    return Target(backend=backend, ops=op_registry(), kernels=kernel_registry(backend.name), providers=providers)
