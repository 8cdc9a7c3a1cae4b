"""The Op base class: parse params once at build time, compute with ``self.xp``.

An op family subclasses ``Op``, lists the canonical op types it runs in
``types`` (frontend-neutral names: each frontend translates its own spellings, e.g.
``kuiper.formats.pnnx_ops``), declares its typed params in ``params`` (kinds from
``kuiper.ops.params``: read, checked and set as attributes before ``setup()``), keeps in
``setup()`` only what is its own (checks across params, tables made once; the typed
accessors below read params whose kind depends on others), and computes in
``forward()`` with the backend's array namespace ``self.xp`` and its primitives
``self.backend.pad`` etc.  Ops never import numpy or cupy to compute.

A param may hold a sub-graph (a ``ModelIR``, or a list of them: a loop body, a
reducer, the branches of an ``If``).  The graph builder builds each one on the
op's backend before the op is made and hands them over; the op reads them with
``subgraph(key)`` and calls them like any Model.  Ops never build graphs.
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any, Callable, ClassVar, Mapping, Sequence

from ..backends.base import NUMPY_ARRAYS
from ..errors import OperatorParamError, UnsupportedOperatorError
from ..model_ir import OpNode
from ..output_buffers import output_array
from .params import REQUIRED, Bool, Choice, Float, Int, Ints, Param, Str

# The ``output_layout`` of an op that hands over its (N, C, *spatial) output as a view of an (N, *spatial, C)
# array (``Op.writes_channels_last``): a plain array of the logical shape, only its strides differ.
CHANNELS_LAST = "channels-last"


class Op:
    """One op instance, bound to one backend."""

    types: ClassVar[tuple[str, ...]] = ()
    # The number of inputs, checked before setup() when set (None: setup checks what it takes).
    arity: ClassVar[int | None] = None
    # The names a file may bind the inputs by ($input, $other ...), for ops whose inputs come in
    # any order: that many inputs are required and ordered(inputs) gives them in this order.
    input_names: ClassVar[tuple[str, ...]] = ()
    # The typed params, read in order and set as attributes before setup() (see kuiper.ops.params).
    params: ClassVar[tuple[Param, ...]] = ()
    # True when every output is a new array that aliases no input and no buffer kept by
    # the op, so the graph may let the next op overwrite it once no one else reads it.
    fresh_output: ClassVar[bool] = False
    # True when the op's one output holds its one input's elements, each once, unchanged, in another
    # shape or order (reshape, permute): an elementwise function commutes with it (kuiper/graph/hoist.py).
    rearranges: ClassVar[bool] = False
    # Set by the graph: positions of inputs nobody reads after this op, whose buffers
    # this op may overwrite (e.g. as out= of an elementwise result).
    donated_inputs: frozenset = frozenset()
    # Set by the graph (kuiper/graph/native_layouts.py) to the kernel's own layout named by
    # ``native_layout()`` when every reader of this op's output takes that layout, or to CHANNELS_LAST
    # (kuiper/graph/channels_last.py).
    output_layout: str | None = None

    # How many times an op's ``forward`` was replaced on an instance, in any op (``__setattr__``): an
    # execution plan specializes again when it changes (kuiper/graph/plan.py).
    forward_replacements: ClassVar[int] = 0

    def __setattr__(self, name: str, value) -> None:
        if name == "forward":
            Op.forward_replacements += 1
        object.__setattr__(self, name, value)

    def native_layout(self) -> str | None:
        """The name of a memory layout of this op's kernel (e.g. "onednn": channels in SIMD blocks)
        in which it can hand its output to readers that take it, skipping two conversions; None: none."""
        return None

    def takes_layout(self, position: int, layout: str) -> bool:
        """Whether input ``position`` may arrive in ``layout`` (a ``native_layout()`` of another op)."""
        return False

    def writes_channels_last(self) -> bool:
        """Whether, told ``output_layout = CHANNELS_LAST``, this op can hand its one (N, C, *spatial) output over
        as a view of an (N, *spatial, C) array: the same values, read through other strides, which saves a
        copy where its readers move the channels last (kuiper/graph/channels_last.py)."""
        return False

    def __init__(self, node: OpNode, backend, subgraphs: Mapping[str, Any] | None = None):
        self.node = node
        self.name = node.name
        self.backend = backend
        self.xp = backend.xp
        self._subgraphs = dict(subgraphs or {})
        self._cache_lock = threading.Lock()
        if self.arity is not None:
            self.require_inputs(self.arity)
        if self.input_names:
            self.input_order = self.named_input_positions(self.input_names)
        for param in self.params:
            setattr(self, param.attr, param.read(self))
        self.setup()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for param in cls.params:
            if callable(getattr(cls, param.attr, None)):
                raise TypeError(f"{cls.__qualname__}: param {param!r} would hide the method '{param.attr}'; "
                                f"give it another attr=")

    def cached(self, table: dict, key, make: Callable[..., Any], *arguments):
        """``table[key]``, made by ``make(*arguments)`` on first use; safe when one Model runs in many threads.

        For what depends on run-time shapes or dtypes (transformed weights per tile
        size, tables per input size): everything else is made in ``setup()``.  On a per-call
        path, pass a method and its arguments rather than a fresh closure, which every call
        would build only to find the value there.
        """
        value = table.get(key)
        if value is None:
            with self._cache_lock:
                value = table.get(key)
                if value is None:
                    value = table[key] = make(*arguments)
        return value

    # -- what subclasses write ------------------------------------------------
    def setup(self) -> None:
        """Read params and weights; raise for anything unsupported.  Runs once, at build time."""

    def forward(self, *inputs):
        """Compute the outputs: one value, or a tuple with one value per output operand."""
        raise NotImplementedError(f"{type(self).__qualname__}.forward")

    def specialized(self, inputs: Sequence[Any]) -> Callable | None:
        """A faster ``forward`` for later calls with inputs like ``inputs`` (this call's, just computed
        with), or None (the default: ``forward`` is called).  Asked once, by the execution plan after
        the model's first call.  It must return what ``forward`` returns for any inputs it is given:
        it tests what it assumed of them (array type, dtype identity, shape) and calls
        ``self.forward`` where that fails.  It may rely on what ``forward`` decided from these inputs
        (a compiled function, a resolved shape), never on their values."""
        return None

    def hand_over_weights(self) -> dict[str, Callable[[], Any]]:
        """The node's weights (by ``@key``) this op hands over to its kernels, which from now on hold the only
        copy: they drop the given array once they have it in a layout of their own.  For each, a function
        that gives the weight as given, exactly (the array while it is held, else remade); the op reads it
        that way too.  Asked once, by the build, which puts a ``model_ir.RemadeWeight`` in the nodes' place
        (kuiper/graph/kept_weights.py).  The default hands nothing over."""
        return {}

    @classmethod
    def elementwise(cls, node: OpNode):
        """This op's math as ``kuiper.ops.elementwise.ElementwiseMath``, if it is elementwise.

        The graph's fusion pass composes the math of chains of such ops into one
        fused op; return None (the default) for ops that are not elementwise.
        Raise the usual param errors for bad params (``NodeParams(node)`` reads them).
        """
        return None

    # -- errors -----------------------------------------------------------------
    def error(self, message: str) -> OperatorParamError:
        return OperatorParamError(f"{self.node.describe()}: {message}")

    def unsupported(self, key: str, value: Any, supported: Sequence[Any] | str) -> UnsupportedOperatorError:
        if not isinstance(supported, str):
            supported = ", ".join(repr(s) for s in supported)
        return UnsupportedOperatorError(
            f"{self.node.describe()}: {key}={value!r} is not supported (supported: {supported})"
        )

    # -- params -------------------------------------------------------------------
    def has_param(self, key: str) -> bool:
        return key in self.node.params and self.node.params[key] is not None

    def param(self, key: str, default: Any = REQUIRED) -> Any:
        if key in self.node.params:
            return self.node.params[key]
        if default is REQUIRED:
            raise self.error(f"missing required param '{key}'")
        return default

    def int_param(self, key: str, default: Any = REQUIRED) -> int:
        return Int(key, default).read(self)

    def optional_int_param(self, key: str) -> int | None:
        return Int(key, None).read(self)

    def positive_int_param(self, key: str, default: Any = REQUIRED) -> int:
        return Int(key, default, low=1).read(self)

    def float_param(self, key: str, default: Any = REQUIRED) -> float:
        return Float(key, default).read(self)

    def bool_param(self, key: str, default: Any = REQUIRED) -> bool:
        return Bool(key, default).read(self)

    def str_param(self, key: str, default: Any = REQUIRED) -> str:
        return Str(key, default).read(self)

    def choice_param(self, key: str, supported: Sequence[str], default: Any = REQUIRED) -> str:
        return Choice(key, supported, default).read(self)

    def ints_param(self, key: str, length: int | None = None, default: Any = REQUIRED) -> tuple[int, ...]:
        """An int or list of ints; a single int is repeated to ``length`` (PyTorch's _pair etc.)."""
        return Ints(key, default, length=length).read(self)

    @functools.cached_property
    def numpy_results(self) -> bool:
        """Whether the backend's arrays are NumPy's, whose results the memory plan may give (``empty``)."""
        return NUMPY_ARRAYS in self.backend.capabilities

    def empty(self, shape, dtype):
        """An uninitialised array for a result this op computes: on a backend of NumPy arrays it comes from
        the memory plan when one runs (kuiper/output_buffers.py), else from the backend's namespace."""
        if self.numpy_results:
            return output_array(tuple(shape), dtype)
        return self.xp.empty(tuple(shape), dtype=dtype)

    @property
    def has_subgraphs(self) -> bool:
        """Whether this op runs sub-graphs (a loop's body, a branch, a reduction's computation)."""
        return bool(self._subgraphs)

    def subgraph(self, key: str):
        """The built Model (or list of Models) of the sub-graph param ``key``."""
        if key not in self._subgraphs:
            raise self.error(f"param '{key}' must hold a sub-graph, found {self.param(key, None)!r:.80}")
        return self._subgraphs[key]

    # -- weights and inputs ----------------------------------------------------
    def weight(self, key: str, required: bool = True, aligned: bool = False):
        """The weight ``@key`` moved to the backend once, or None when optional and absent.

        ``aligned=True`` for a weight that reaches a matmul: a mapped view at an odd file
        offset is copied once to a 64-byte boundary (see ``Backend.aligned``).
        """
        array = self.node.attrs.get(key)
        if array is None:
            if required:
                raise self.error(f"missing weight '@{key}'")
            return None
        return self.backend.aligned(array) if aligned else self.backend.asarray(array)

    def input_index(self, key: str, default: int | None = None) -> int | None:
        """Position of the input bound to ``$key``, else ``default``."""
        keys = self.node.input_keys
        return keys.index(key) if key in keys else default  # a test, not list.index's ValueError: 1 us a miss

    def named_input_positions(self, names: Sequence[str]) -> tuple[int, ...]:
        """Positions of the inputs bound to ``$name`` for each name; unbound names take the
        positions left over, in line order.  Exactly ``len(names)`` inputs are required."""
        self.require_inputs(len(names))
        bound = [self.input_index(name) for name in names]
        free = iter(i for i in range(len(names)) if i not in bound)
        return tuple(next(free) if at is None else at for at in bound)

    def ordered(self, inputs: Sequence[Any]) -> tuple[Any, ...]:
        """The inputs in the order of ``input_names``."""
        return tuple(inputs[at] for at in self.input_order)

    def input_pair(self, first: str, second: str) -> tuple[int, int]:
        """Positions of the two inputs bound to ``$first`` and ``$second``, else in line order."""
        return self.named_input_positions((first, second))

    def require_inputs(self, low: int, high: int | None = None) -> None:
        count = len(self.node.inputs)
        high = low if high is None else high
        if not low <= count <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise self.error(f"expects {expected} input(s), the file gives {count}")


class NodeParams(Op):
    """The param accessors of Op on a bare node, for class methods such as ``elementwise``.

    It has no backend: only the ``*_param`` readers and ``error``/``unsupported`` may be used.
    """

    def __init__(self, node: OpNode):  # noqa: D107 - deliberately not Op.__init__: no backend, no setup
        self.node = node
        self.name = node.name


def spatial_variants(base: type[Op], name: str) -> tuple[type[Op], ...]:
    """The 1-D, 2-D and 3-D classes of an op family written once for ``spatial`` dims.

    ``name`` holds ``{}`` where the dim count goes (``"Conv{}d"``); it is the class name and op type.
    """
    return tuple(
        type(name.format(n), (base,), {"types": (name.format(n),), "spatial": n, "__module__": base.__module__})
        for n in (1, 2, 3)
    )


def normalize_axis(axis: int, rank: int, op: Op) -> int:
    """PyTorch dim (negative counts from the end) -> a 0-based axis, with a clear error."""
    if not -rank <= axis < rank:
        raise op.error(f"dim {axis} is out of range for a tensor of rank {rank}")
    return axis % rank


def is_to_the_end(value: int) -> bool:
    """PNNX saturates int64 'to the end' indices at INT_MAX."""
    return value >= 2147483647


def prod(values) -> int:
    return math.prod(values)
