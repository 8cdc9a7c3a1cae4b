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
    """Return a list of Op subclasses; each declares the PNNX type strings it runs in ``types``."""


@hookspec
def kuiper_add_kernels(backend_name):
    """Return ``{op_type: Op subclass}``: implementations that replace the generic op on that backend.

    Use this for a faster kernel on one backend (the CuPy backend's fused
    elementwise kernels, a plugin's SIMD convolution).  Return None or ``{}``
    for backends you do not specialise.
    """


@hookspec
def kuiper_add_frontends():
    """Return a list of Frontend classes (see ``kuiper.frontends.Frontend``).

    A frontend turns a model file into a ``kuiper.model_ir.ModelIR``;
    ``kuiper.load(path)`` asks each one whether it claims the path.
    """
