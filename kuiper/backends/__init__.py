"""Finding and creating backends by name."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import choose_backend
from ..errors import BackendUnavailableError, PluginError
from ..plugins import backend_registry, primitive_registry
from .base import PRIMITIVES, Backend

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
        backend = registered.obj()
        backend.use_primitives(plugin_primitives(choice.name))
        _instances[choice.name] = backend
    return _instances[choice.name]


def plugin_primitives(backend_name: str) -> dict:
    """The functions plugins registered (``kuiper_add_primitives``) to replace primitives on this backend."""
    primitives = {}
    for primitive, registered in primitive_registry(backend_name).items():
        if primitive not in PRIMITIVES:
            raise PluginError(
                f"plugin '{registered.plugin}' replaces '{primitive}' on backend '{backend_name}', "
                f"which is not a backend primitive; primitives: {', '.join(PRIMITIVES)}"
            )
        primitives[primitive] = registered.obj
    return primitives
