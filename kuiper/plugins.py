"""The pluggy plugin manager: built-ins first, then the ``kuiper`` entry-point group.

Built-in plugins are registered under the same names as their entry points
(see setup.cfg), so an installed kuiper and a source checkout behave alike and
nothing registers twice.
"""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass

import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "kuiper"
BUILTIN_PLUGINS = {
    "numpy": "kuiper.backends.numpy_backend",
    "cupy": "kuiper.backends.cupy_backend",
    "builtin_ops": "kuiper.ops",
    "pnnx": "kuiper.formats.pnnx",
    "hlo": "kuiper.hlo",
}
# Set to 1 to load only the built-ins (e.g. to rule out a broken third-party plugin).
DISABLE_AUTOLOAD_ENV = "KUIPER_DISABLE_PLUGIN_AUTOLOAD"


@dataclass(frozen=True)
class Registered:
    """Something a plugin registered, and which plugin registered it."""

    obj: type
    plugin: str


@functools.lru_cache(maxsize=None)
def plugin_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("kuiper")
    manager.add_hookspecs(hookspecs)
    for name, module in BUILTIN_PLUGINS.items():
        manager.register(importlib.import_module(module), name=name)
    if os.environ.get(DISABLE_AUTOLOAD_ENV, "") not in ("1", "true", "yes"):
        try:
            manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except Exception as exc:  # a third party's import error must say whose it is
            raise PluginError(
                f"a plugin in entry-point group '{ENTRY_POINT_GROUP}' failed to load: {exc!r} "
                f"(set {DISABLE_AUTOLOAD_ENV}=1 to load only kuiper's built-ins)"
            ) from exc
    return manager


def reset_registries() -> None:
    """Forget what the hooks returned, after registering or unregistering a plugin at run time."""
    backend_registry.cache_clear()
    op_registry.cache_clear()
    kernel_registry.cache_clear()
    frontend_registry.cache_clear()


def _collect(hook, **kwargs):
    """Yield (plugin name, result) for every non-empty result of ``hook``.

    The hook is called through pluggy, so hook wrappers, ``tryfirst``/``trylast``
    and ``call_historic`` semantics all hold.  Pluggy returns bare results, so
    the plugin behind each registered class is found from the class's module.
    """
    results = hook(**kwargs)
    for result in reversed(results):  # pluggy calls last-registered first; report built-ins first
        if result:
            yield result


def plugin_of(obj) -> str:
    """The name of the registered plugin whose module defines ``obj`` (its module name if none)."""
    module = getattr(obj, "__module__", "") or ""
    best, found = "", ""
    for name, plugin in plugin_manager().list_name_plugin():
        plugin_module = getattr(plugin, "__name__", None) or type(plugin).__module__
        if (module == plugin_module or module.startswith(plugin_module + ".")) and len(plugin_module) > len(best):
            best, found = plugin_module, name
    return found if best else module


def _by_name(hook, kind: str) -> dict[str, Registered]:
    """Classes returned by ``hook``, keyed by their ``name``; a missing or repeated name is an error."""
    registry: dict[str, Registered] = {}
    for classes in _collect(hook):
        for cls in classes:
            plugin = plugin_of(cls)
            if not getattr(cls, "name", ""):
                raise PluginError(f"plugin '{plugin}' registered {kind} class {cls.__qualname__} without a name")
            if cls.name in registry:
                raise PluginError(
                    f"{kind} '{cls.name}' is registered by both '{registry[cls.name].plugin}' and '{plugin}'"
                )
            registry[cls.name] = Registered(cls, plugin)
    return registry


@functools.lru_cache(maxsize=None)
def backend_registry() -> dict[str, Registered]:
    return _by_name(plugin_manager().hook.kuiper_add_backends, "backend")


@functools.lru_cache(maxsize=None)
def op_registry() -> dict[str, Registered]:
    registry: dict[str, Registered] = {}
    for classes in _collect(plugin_manager().hook.kuiper_add_ops):
        for cls in classes:
            plugin = plugin_of(cls)
            if not getattr(cls, "types", ()):
                raise PluginError(f"plugin '{plugin}' registered op class {cls.__qualname__} with no 'types'")
            for op_type in cls.types:
                if op_type in registry:
                    raise PluginError(
                        f"op type '{op_type}' is registered by both '{registry[op_type].plugin}' "
                        f"({registry[op_type].obj.__qualname__}) and '{plugin}' ({cls.__qualname__}); "
                        "use the kuiper_add_kernels hook to replace an op on one backend"
                    )
                registry[op_type] = Registered(cls, plugin)
    return registry


@functools.lru_cache(maxsize=None)
def kernel_registry(backend_name: str) -> dict[str, Registered]:
    registry: dict[str, Registered] = {}
    for kernels in _collect(plugin_manager().hook.kuiper_add_kernels, backend_name=backend_name):
        for op_type, cls in kernels.items():
            plugin = plugin_of(cls)
            if op_type in registry:
                raise PluginError(
                    f"backend '{backend_name}': op type '{op_type}' has kernels from both "
                    f"'{registry[op_type].plugin}' and '{plugin}'"
                )
            registry[op_type] = Registered(cls, plugin)
    return registry


@functools.lru_cache(maxsize=None)
def frontend_registry() -> dict[str, Registered]:
    return _by_name(plugin_manager().hook.kuiper_add_frontends, "model format")
