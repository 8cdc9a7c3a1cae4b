"""The pluggy plugin manager: built-ins first, then the ``kuiper`` entry-point group.

Built-in plugins are registered under the same names as their entry points
(see setup.cfg), so an installed kuiper and a source checkout behave alike and
nothing registers twice.  A third-party plugin that fails (its import raises,
or one of its hooks does) is dropped with one PluginWarning naming it, its
distribution and the error: one broken package must not break every command.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import warnings
from dataclasses import dataclass

import pluggy

from . import hookspecs
from .config import switch_from_env
from .errors import PluginError, PluginWarning

ENTRY_POINT_GROUP = "kuiper"
BUILTIN_PLUGINS = {
    "numpy": "kuiper.backends.numpy_backend",
    "cupy": "kuiper.backends.cupy_backend",
    "builtin_ops": "kuiper.ops",
    "numba_kernels": "kuiper.numba_kernels",
    "pnnx": "kuiper.formats.pnnx",
    # The plugin module, not the package: pluggy before 1.7 reads every name dir() lists while
    # registering, and the package lists its lazily imported parser (kuiper.hlo.__dir__).
    "hlo": "kuiper.hlo.plugin",
}
# Set to 1 to load only the built-ins (e.g. to rule out a broken third-party plugin).
DISABLE_AUTOLOAD_ENV = "KUIPER_DISABLE_PLUGIN_AUTOLOAD"

# Plugin name -> where it came from, for warnings: "entry point 'toy = toy_format' of distribution toy-format 0.1".
_origins: dict[str, str] = {}


@dataclass(frozen=True)
class Registered:
    """Something a plugin registered, and which plugin registered it."""

    obj: type
    plugin: str


@functools.lru_cache(maxsize=None)
def plugin_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager("kuiper")
    manager.add_hookspecs(hookspecs)
    _origins.clear()
    for name, module in BUILTIN_PLUGINS.items():
        manager.register(importlib.import_module(module), name=name)
    if not switch_from_env(DISABLE_AUTOLOAD_ENV, default=False):
        _load_entry_points(manager)
    return manager


def _load_entry_points(manager: pluggy.PluginManager) -> None:
    """Register each entry point of the group (as pluggy's loader does), skipping those that fail to load."""
    for distribution in importlib.metadata.distributions():
        for entry_point in distribution.entry_points:
            name = entry_point.name
            if entry_point.group != ENTRY_POINT_GROUP or manager.has_plugin(name) or manager.is_blocked(name):
                continue  # another group, a built-in (registered first), or a plugin dropped before
            origin = (
                f"entry point '{name} = {entry_point.value}' of distribution "
                f"{distribution.metadata['Name']} {distribution.version}"
            )
            try:
                manager.register(entry_point.load(), name=name)
            except Exception as exc:  # noqa: BLE001 - whatever a third party's import or registration raises
                _warn_dropped(f"'{name}' ({origin})", "failed to load", exc)
                continue
            _origins[name] = origin


def _warn_dropped(plugin: str, what: str, exc: BaseException) -> None:
    warnings.warn(
        f"kuiper plugin {plugin} {what}: {type(exc).__name__}: {exc}; going on without it "
        f"(set {DISABLE_AUTOLOAD_ENV}=1 to load only kuiper's built-ins)",
        PluginWarning,
        stacklevel=3,
    )


def reset_registries() -> None:
    """Forget what the hooks returned, after registering or unregistering a plugin at run time."""
    backend_registry.cache_clear()
    op_registry.cache_clear()
    kernel_registry.cache_clear()
    primitive_registry.cache_clear()
    provider_registry.cache_clear()
    frontend_registry.cache_clear()
    custom_call_registry.cache_clear()


def _collect(hook, **kwargs):
    """Yield every non-empty result of ``hook``, built-ins first.

    The hook is called through pluggy, so hook wrappers, ``tryfirst``/``trylast``
    and ``call_historic`` semantics all hold.  When a third-party implementation
    raises, its plugin is dropped (one warning) and the hook called again without it;
    an error in a built-in is kuiper's own and propagates.
    """
    while True:
        try:
            results = hook(**kwargs)
            break
        except Exception as exc:
            plugin = _raising_plugin(hook, exc)
            if plugin is None or plugin in BUILTIN_PLUGINS:
                raise
            origin = _origins.get(plugin)
            plugin_manager().set_blocked(plugin)  # unregisters it, and keeps it out
            reset_registries()  # what it registered through other hooks goes too
            _warn_dropped(f"'{plugin}'" + (f" ({origin})" if origin else ""), f"raised in {hook.name}", exc)
    for result in reversed(results):  # pluggy calls last-registered first; report built-ins first
        if result:
            yield result


def _raising_plugin(hook, exc: BaseException) -> str | None:
    """The plugin whose implementation of ``hook`` raised ``exc``: the innermost frame of the
    traceback that runs one of the hook's implementations (an outer one may be a wrapper)."""
    plugins = {}
    for implementation in hook.get_hookimpls():
        function = getattr(implementation.function, "__func__", implementation.function)  # methods
        code = getattr(function, "__code__", None)
        if code is not None:
            plugins[code] = implementation.plugin_name
    found = None
    traceback = exc.__traceback__
    while traceback is not None:
        found = plugins.get(traceback.tb_frame.f_code, found)
        traceback = traceback.tb_next
    return found


def plugin_of(obj) -> str:
    """The name of the registered plugin whose module defines ``obj`` (its module name if none)."""
    module = getattr(obj, "__module__", "") or ""
    best, found = "", ""
    for name, plugin in plugin_manager().list_name_plugin():
        plugin_module = getattr(plugin, "__name__", None) or type(plugin).__module__
        if (module == plugin_module or module.startswith(plugin_module + ".")) and len(plugin_module) > len(best):
            best, found = plugin_module, name
    return found if best else module


def _add_once(registry: dict[str, Registered], key: str, entry: Registered, what: str, advice: str = "") -> None:
    """Put ``entry`` under ``key``; a key that two plugins give is an error naming both (and ``advice``)."""
    first = registry.get(key)
    if first is not None:
        raise PluginError(f"{what} '{key}' is registered by both {_named(first)} and {_named(entry)}{advice}")
    registry[key] = entry


def _named(entry: Registered) -> str:
    qualname = getattr(entry.obj, "__qualname__", None)  # an op type name (custom calls) has none
    return f"'{entry.plugin}'" + (f" ({qualname})" if qualname else "")


def _by_name(hook, kind: str) -> dict[str, Registered]:
    """Classes returned by ``hook``, keyed by their ``name``; a missing or repeated name is an error."""
    registry: dict[str, Registered] = {}
    for classes in _collect(hook):
        for cls in classes:
            plugin = plugin_of(cls)
            if not getattr(cls, "name", ""):
                raise PluginError(f"plugin '{plugin}' registered {kind} class {cls.__qualname__} without a name")
            _add_once(registry, cls.name, Registered(cls, plugin), kind)
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
                _add_once(registry, op_type, Registered(cls, plugin), "op type",
                          "; use the kuiper_add_kernels hook to replace an op on one backend")
    for op_type, registered in registry.items():
        _refuse_a_frontends_spelling(op_type, registered, "an op",
                                     "; to replace that op, register a kernel for it (kuiper_add_kernels)")
    return registry


def backend_capabilities(backend_name: str) -> frozenset[str]:
    """What the named backend advertises (``Backend.capabilities``); nothing for an unknown name."""
    registered = backend_registry().get(backend_name)
    return frozenset(registered.obj.capabilities) if registered is not None else frozenset()


def _merged(mappings, what: str, plugin_for=plugin_of) -> dict[str, Registered]:
    """``{key: Registered}`` from hook results that are ``{key: obj}`` mappings; two plugins giving one key is an error."""
    registry: dict[str, Registered] = {}
    for entries in mappings:
        for key, obj in entries.items():
            _add_once(registry, key, Registered(obj, plugin_for(obj)), what)
    return registry


def _per_backend(hook, backend_name: str, what: str) -> dict[str, Registered]:
    """``{key: Registered}`` from a per-backend hook."""
    results = _collect(hook, backend_name=backend_name, capabilities=backend_capabilities(backend_name))
    return _merged(results, f"backend '{backend_name}': {what}")


@functools.lru_cache(maxsize=None)
def kernel_registry(backend_name: str) -> dict[str, Registered]:
    """``{op type: Registered(Op subclass)}`` replacing generic ops on this backend."""
    registry = _per_backend(plugin_manager().hook.kuiper_add_kernels, backend_name, "op type")
    _refuse_undeclared_types(registry, f"a kernel on backend '{backend_name}'")
    return registry


def _refuse_undeclared_types(registry: dict[str, Registered], what: str) -> None:
    """A PluginError for a type no op declares (a kernel for it would never run): naming the canonical
    type when it is a frontend's spelling of one, else the nearest declared types."""
    declared = op_registry()
    for op_type, registered in registry.items():
        if op_type in declared:
            continue
        _refuse_a_frontends_spelling(op_type, registered, what)
        by_lower_case = {declared_type.lower(): declared_type for declared_type in declared}
        near = [by_lower_case[found] for found in difflib.get_close_matches(op_type.lower(), list(by_lower_case), n=3)]
        raise PluginError(
            f"plugin {_named(registered)} registers {what} for op type '{op_type}', which no op declares, so no "
            f"model would run it{'; did you mean ' + ' or '.join(map(repr, near)) + '?' if near else ''} "
            "(`kuiper ops` lists the op types)")


def _refuse_a_frontends_spelling(op_type: str, registered: Registered, what: str, advice: str = "") -> None:
    """A PluginError when ``op_type`` is how a frontend spells a canonical type: frontends translate their
    spellings before any op or kernel is chosen, so one registered under a spelling is never reached."""
    for frontend in frontend_registry().values():
        spellings = getattr(frontend.obj, "spellings", dict)()
        canonical = spellings.get(op_type)
        if canonical is not None and canonical != op_type:
            language = frontend.obj.name.upper()
            raise PluginError(
                f"plugin {_named(registered)} registers {what} for op type '{op_type}': {op_type} is {language}'s "
                f"spelling of {canonical} (the {language} frontend translates it before any op is chosen, so "
                f"nothing registered under '{op_type}' would run); register it under '{canonical}'{advice}")


@functools.lru_cache(maxsize=None)
def primitive_registry(backend_name: str) -> dict[str, Registered]:
    """``{primitive name: Registered(function)}`` replacing Backend primitives on this backend."""
    return _per_backend(plugin_manager().hook.kuiper_add_primitives, backend_name, "primitive")


@functools.lru_cache(maxsize=None)
def provider_registry(backend_name: str) -> dict[str, Registered]:
    """``{provider name: Registered(provider)}``: what may claim partitions of a graph built for this backend."""
    return _per_backend(plugin_manager().hook.kuiper_add_providers, backend_name, "provider")


@functools.lru_cache(maxsize=None)
def frontend_registry() -> dict[str, Registered]:
    return _by_name(plugin_manager().hook.kuiper_add_frontends, "model format")


@functools.lru_cache(maxsize=None)
def custom_call_registry() -> dict[str, Registered]:
    """``{custom_call_target: Registered(op type name or translator function)}`` for HLO custom calls."""
    return _merged(_collect(plugin_manager().hook.kuiper_add_custom_calls), "custom-call target", _custom_call_plugin)


def _custom_call_plugin(translation) -> str:
    return plugin_of(translation) if callable(translation) else f"the plugin naming op type {translation!r}"
