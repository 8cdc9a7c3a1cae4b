"""Finding and creating backends by name."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import choose_backend
from ..errors import BackendUnavailableError
from ..plugins import backend_registry
from .base import Backend

_instances: dict[str, Backend] = {}


@dataclass(frozen=True)
class BackendInfo:
    name: str
    plugin: str
    available: bool
    reason: str
    description: str


def backend_infos() -> list[BackendInfo]:
    infos = []
    for name, registered in backend_registry().items():
        available, reason = registered.obj.availability()
        infos.append(BackendInfo(name, registered.plugin, available, reason, registered.obj.description))
    return infos


def get_backend(name: str | None = None) -> Backend:
    """The backend named by ``name`` or, when None, by the environment/config (see kuiper.config)."""
    choice = choose_backend(name)
    registry = backend_registry()
    registered = registry.get(choice.name)
    if registered is None:
        raise BackendUnavailableError(
            f"unknown backend '{choice.name}' (from {choice.source}); registered backends: {', '.join(sorted(registry))}"
        )
    if choice.name not in _instances:
        available, reason = registered.obj.availability()
        if not available:
            raise BackendUnavailableError(f"backend '{choice.name}' (from {choice.source}) is not available: {reason}")
        _instances[choice.name] = registered.obj()
    return _instances[choice.name]
