"""The hooks through which every backend, operator and kernel reaches kuiper.

Built-ins use them exactly as third-party plugins do.  A plugin is a module
(or object) with functions named like these, decorated with
``kuiper.hookimpl``, and advertised in its package metadata::

    [options.entry_points]
    kuiper =
        myplugin = myplugin.module
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("kuiper")
hookimpl = pluggy.HookimplMarker("kuiper")


@hookspec
def kuiper_add_backends():
    """Return a list of Backend subclasses this plugin provides."""


@hookspec
def kuiper_add_ops():
    """Return a list of Op subclasses; each declares the op type strings it runs in ``types``.

    kuiper's own ops use canonical names (``Conv2d``, ``ReLU``; ``kuiper ops`` lists them with the
    PNNX spellings its PNNX frontend translates to each); a type no frontend translates (a PNNX
    custom module such as ``models.yolo.Detect``) reaches the graph as the file spells it.
    """


@hookspec
def kuiper_add_kernels(backend_name, capabilities):
    """Return ``{op_type: Op subclass}``: implementations that replace the generic op on that backend.

    Use this for a faster kernel on one backend (kuiper's Numba CPU kernels, a
    plugin's SIMD convolution).  ``capabilities`` is the backend's set (see
    kuiper.backends.base): choose by it rather than by name, e.g. kernels written
    for NumPy arrays serve every backend with ``"numpy-arrays"``.  An
    implementation may take either argument or both.  Return None or ``{}`` for
    backends you do not specialise.  Key kernels by canonical op types (``ReLU``, as ``kuiper ops``
    lists them): a key no op declares, or a frontend's spelling (PNNX's ``nn.ReLU``), is refused
    with a PluginError naming the type to use, since no model would ever reach it.
    """


@hookspec
def kuiper_add_primitives(backend_name, capabilities):
    """Return ``{primitive name: function}``: replacements for Backend primitives on that backend.

    The names are Backend methods listed in ``kuiper.backends.base.PRIMITIVES``
    (``softmax_in_place``, ``compile_elementwise``, ...).  Each function is called
    as ``function(default, *args)``, where ``default`` is the backend's own method,
    for the calls the plugin does not take.  They are installed once, when the
    backend is first created.  Return None or ``{}`` for backends you do not specialise.
    """


@hookspec
def kuiper_add_providers(backend_name, capabilities):
    """Return ``{name: provider}``: execution providers that claim partitions of graphs built for that backend.

    After the graph passes, each provider is offered the model's steps in order (see
    ``kuiper.graph.providers.Provider``) and claims runs of them it compiles whole; a claimed run
    becomes one step that calls the provider's compiled partition, and what no provider claims
    runs op by op.  Providers are asked in plugin order, built-ins first; each sees only what
    earlier ones left.  Return None or ``{}`` for backends you do not serve.
    """


@hookspec
def kuiper_add_frontends():
    """Return a list of Frontend classes (see ``kuiper.frontends.Frontend``).

    A frontend turns a model file into a ``kuiper.model_ir.ModelIR``;
    ``kuiper.load(path)`` asks each one whether it claims the path.
    """


@hookspec
def kuiper_add_custom_calls():
    """Return ``{custom_call_target: translation}`` for HLO ``custom-call`` targets this plugin runs.

    A translation is either the type of an op (one kuiper or a plugin registers through
    ``kuiper_add_ops``), which then gets the custom call's operands and results in order and the
    params ``target`` and ``backend_config`` (the attribute's text, "" when absent), or a function
    ``translate(site) -> list[OpNode]`` given a ``kuiper.hlo.site.Site``, as kuiper's own translators
    are. A target no plugin registers is refused at load time, naming it.
    """
