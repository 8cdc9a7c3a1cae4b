"""Memory descriptors and primitives of oneDNN, owned by Python objects that free them.

A memory descriptor says how an array lies in memory: plain row-major (``Layout.plain``), or
whatever a primitive chose (``Primitive.layout``, e.g. channels in blocks of 8 or 16).  Arrays
are NumPy buffers of that descriptor's byte size: oneDNN only ever sees their addresses, in
memory objects that each thread makes once per primitive and points at the call's buffers
(making and freeing them on every call cost 9 us each, half of a small convolution's call), and
re-points only where the buffer changed (a weight's never does).  So one primitive can run in
several threads at once; each thread brings its own scratchpad.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref

import numpy as np

from ..output_buffers import output_array
from .binding import ARG_SCRATCHPAD, QUERY_EXEC_ARG_MD, QUERY_IMPL_INFO, Dims, ExecArg, Handle, Library, OneDnnError

# Multiply-adds under which a call runs on one thread whatever was asked: waking a second
# OpenMP thread for tiny regions costs more than it shares out (a 1x64x7 Conv1d, 61 K
# multiply-adds, with its reorders in and out: 34 us on one thread, 60 us on two; 1x32x124,
# 375 K: 43 us either way).  The tiny convs of small audio and toy nets sit below it, the
# smallest of MobileNetV2 (a 7x7x960 depthwise, 423 K) above it.
ONE_THREAD_WORK = 256 * 1024
# Multiply-adds of a matrix product under which NumPy's BLAS on the calling thread beats a oneDNN
# call, which costs about 10 us more (1x512x512, 256 K: 21 us on NumPy, 30 us on oneDNN;
# 16x256x256, 1 M: 38 and 42 us; 64x256x256: 100 us against 54 us on oneDNN's two threads).
# The kernels that put Linear layers and attention on oneDNN leave smaller products to NumPy.
PRODUCT_WORK = 1 << 20


def product_on_onednn(rows: int, inner: int, columns: int) -> bool:
    """Whether a float32 product of ``rows`` x ``inner`` by ``inner`` x ``columns`` (rows over all batches)
    goes to oneDNN: from ``PRODUCT_WORK`` multiply-adds, and never a single row.  One row is a
    matrix-vector product, which BLAS's gemv does faster than oneDNN's matmul at any size (warm, 1 thread:
    1 x 1280 by a 1280 x 1000 constant weight 67 us against 182; against a weight given per call, 65
    against 99); from two rows oneDNN wins (183 against 723 us, 104 against 252)."""
    return rows > 1 and rows * inner * columns >= PRODUCT_WORK
# Multiply-adds under which a convolution (not grouped, not transposed) reads and writes plain
# NCHW and runs on one thread: oneDNN's im2col + GEMM on plain arrays then beats its blocked
# kernels, whose reorders in and out cost more than the convolution (1x32x200 Conv1d, k=3,
# 614 K: 52 us against 70-80; 1x16x14x14 3x3 to 32 channels, 226 K: 33 against 62).  Grouped and
# depthwise convs (2.5-6x slower on plain layouts), transposed ones and larger convs keep the
# blocked layouts (64 channels 3x3 on 14x14, 7.2 M: 268 against 221-253 us).  Only between plain
# neighbours, though: a small conv whose input comes, or whose output goes, in another oneDNN conv's
# blocked layout keeps that layout (onednn/conv.py, ``plain_io``), as the reorders it saves are then
# its own (a 32x32 ResNet of 6-24 channels: 1.0 -> 0.43 ms a call; a 32x32 MobileNetV2 1.13 -> 0.81).
PLAIN_CONV_WORK = 1 << 20


MAX_PLANS = 8  # primitives kept per op object (one per input shape and thread count)


class PlanCache(dict):
    """A primitive's plans by key, made on first use; at most ``MAX_PLANS`` are kept, the oldest going
    first.  A key oneDNN refused (``refusal_key``: the part of the key that decided it) is refused
    again without asking: a refusal costs a whole primitive search."""

    def __init__(self):
        super().__init__()
        self.refused: dict = {}  # refusal key -> why

    def get_or_make(self, key, make, refusal_key=None):
        plan = self.get(key)
        if plan is None:
            refusal_key = key if refusal_key is None else refusal_key
            if refusal_key in self.refused:
                raise OneDnnError(self.refused[refusal_key])
            try:
                plan = make()
            except OneDnnError as exc:
                self.refused[refusal_key] = str(exc)
                raise
            if len(self) >= MAX_PLANS:
                self.pop(next(iter(self)))
            self[key] = plan
        return plan


def dims(values) -> Dims:
    return Dims(*(int(v) for v in values))


class Layout:
    """A memory descriptor: float32 data of ``shape`` laid out in a way oneDNN knows."""

    def __init__(self, library: Library, handle: Handle, owner=None):
        self.library = library
        self.handle = handle
        self.owner = owner  # a descriptor read from a primitive lives as long as the primitive

    @classmethod
    def plain(cls, library: Library, shape) -> Layout:
        """Row-major (C-contiguous), as NumPy lays out ``np.empty(shape, np.float32)``."""
        strides = [int(np.prod(shape[axis + 1:], dtype=np.int64)) for axis in range(len(shape))]
        return cls.strided(library, shape, strides)

    @classmethod
    def strided(cls, library: Library, shape, strides) -> Layout:
        """Elements ``strides`` apart along each dim (a transposed view of a row-major array, say)."""
        handle = Handle()
        library.check(library.memory_desc_create_with_strides(ctypes.byref(handle), len(shape), dims(shape),
                                                              library.f32, dims(strides)),
                      f"layout {tuple(shape)} with strides {tuple(strides)}")
        return cls(library, handle)

    @classmethod
    def tagged(cls, library: Library, shape, tag: str) -> Layout:
        """One of oneDNN's named layouts (its format tags: ``aBcd16b``, channels in blocks of 16)."""
        handle = Handle()
        library.check(library.memory_desc_create_with_tag(ctypes.byref(handle), len(shape), dims(shape), library.f32,
                                                          library.format_tag(tag)), f"layout {shape} {tag}")
        return cls(library, handle)

    @classmethod
    def any(cls, library: Library, shape) -> Layout:
        """No layout yet: the primitive made with it picks the one it is fastest with."""
        handle = Handle()
        library.check(library.memory_desc_create_with_tag(ctypes.byref(handle), len(shape), dims(shape),
                                                          library.f32, library.format_any), f"layout {shape}")
        return cls(library, handle)

    @functools.cached_property
    def nbytes(self) -> int:
        return self.library.memory_desc_get_size(self.handle)  # a descriptor never changes

    def empty(self) -> np.ndarray:
        """A fresh buffer for data in this layout (a kept weight, a call's scratch)."""
        return np.empty(self.nbytes // 4, np.float32)

    def output(self) -> np.ndarray:
        """A buffer for a call's result in this layout: the memory plan's when one is offered
        (kuiper/output_buffers.py), never for anything kept beyond the call."""
        return output_array((self.nbytes // 4,), np.float32)

    def __eq__(self, other) -> bool:
        return other is self or (isinstance(other, Layout)
                                 and bool(self.library.memory_desc_equal(self.handle, other.handle)))

    __hash__ = None  # compared, never hashed

    def __del__(self):
        if self.owner is None and self.handle:
            self.library.memory_desc_destroy(self.handle)


class Primitive:
    """A created primitive and its descriptor; ``run`` executes it on NumPy buffers."""

    def __init__(self, library: Library, create_descriptor, what: str):
        """``create_descriptor(pointer)`` fills in a primitive descriptor; errors name ``what``."""
        self.library = library
        self.descriptor = Handle()
        self.handle = Handle()
        library.check(create_descriptor(ctypes.byref(self.descriptor)), what)
        library.check(library.primitive_create(ctypes.byref(self.handle), self.descriptor), what)
        self.scratchpad = self.layout(ARG_SCRATCHPAD)
        # This thread's memory objects and argument table (``_bind``): a thread's are destroyed when it ends
        # (or with the primitive), so threads that come and go leave nothing behind.
        self._bound = threading.local()

    def layout(self, argument: int) -> Layout:
        """The layout this primitive wants for one of its arguments."""
        return Layout(self.library, Handle(self.library.primitive_desc_query_md(self.descriptor, QUERY_EXEC_ARG_MD,
                                                                                 argument)), owner=self)

    def implementation(self) -> str:
        """oneDNN's name for the code it runs (e.g. ``brg:avx512_core``), for ``kuiper info``."""
        text = ctypes.c_char_p()
        self.library.primitive_desc_query(self.descriptor, QUERY_IMPL_INFO, 0, ctypes.byref(text))
        return text.value.decode() if text.value else "?"

    def run(self, arguments: dict[int, tuple[Layout, np.ndarray]], threads: int) -> None:
        """Execute on ``{argument number: (layout, buffer)}``, with its own scratchpad, on ``threads``
        (the count it was made for).  Each argument's layout is the one the primitive was made for."""
        library = self.library
        if self.scratchpad.nbytes:
            arguments = {**arguments, ARG_SCRATCHPAD: (self.scratchpad, scratch_buffer(self.scratchpad.nbytes))}
        numbers = tuple(arguments)
        memories, table = getattr(self._bound, "memories", None), getattr(self._bound, "table", None)
        if memories is None or numbers != self._bound.numbers:
            memories, table = self._bind(arguments)
        layouts, pointed_at = self._bound.layouts, self._bound.pointed_at
        for number, (layout, buffer) in arguments.items():
            if layout is not layouts[number] and layout != layouts[number]:
                # A memory object reads its buffer through the descriptor it was made with.
                raise OneDnnError(f"argument {number} arrives in another layout than the primitive was made for")
            kept = pointed_at.get(number)
            if kept is None or kept() is not buffer:
                # Constant operands (a weight, a bias, the scratch buffer) come back as the same array
                # every call: their memory objects keep pointing at them.  A weak reference, so that a
                # call's input and output are not kept alive, and a dead array is never taken for a new
                # one at its address.
                library.check(library.memory_set_data_handle(memories[number], address(buffer)), "memory")
                pointed_at[number] = weakref.ref(buffer)
        library.set_threads(threads)
        stream = library.stream
        library.check(library.primitive_execute(self.handle, stream, len(table), table), "execute")
        library.check(library.stream_wait(stream), "wait")

    def _bind(self, arguments: dict[int, tuple[Layout, np.ndarray]]):
        """This thread's memory objects for these argument numbers, and the argument table naming them."""
        owned = getattr(self._bound, "owned", None)
        if owned is None:
            owned = self._bound.owned = _Memories(self.library)
        memories = getattr(self._bound, "memories", None) or {}
        layouts = getattr(self._bound, "layouts", None) or {}
        for number, (layout, _) in arguments.items():
            if number not in memories:
                layouts[number] = layout
                memories[number] = owned.create(layout)
        table = (ExecArg * len(arguments))(*(ExecArg(number, memories[number]) for number in arguments))
        self._bound.memories, self._bound.layouts, self._bound.table = memories, layouts, table
        self._bound.numbers = tuple(arguments)
        self._bound.pointed_at = {}  # argument number -> a weak reference to the array its memory object points at
        return memories, table

    def __del__(self):
        if self.handle:
            self.library.primitive_destroy(self.handle)
        if self.descriptor:
            self.library.primitive_desc_destroy(self.descriptor)


class _Memories:
    """One thread's memory objects for one primitive, destroyed with it: when the thread ends (its
    thread-local is cleared) or when the primitive goes (and its thread-locals with it)."""

    def __init__(self, library: Library):
        self.library = library
        self.handles: list[Handle] = []

    def create(self, layout: Layout) -> Handle:
        """A memory object of ``layout``, pointing nowhere yet, destroyed with this owner."""
        memory = Handle()
        self.library.check(self.library.memory_create(ctypes.byref(memory), layout.handle, self.library.engine, None),
                           "memory")
        self.handles.append(memory)
        return memory

    def __del__(self):
        for memory in self.handles:
            self.library.memory_destroy(memory)


_scratch = threading.local()  # this thread's scratch buffer (``scratch_buffer``)


def scratch_buffer(nbytes: int) -> np.ndarray:
    """A buffer of at least ``nbytes`` for a primitive's scratchpad, one per thread and grown as needed.

    A scratchpad only lives during one execution, and a thread runs one primitive at a time, so
    every primitive a thread runs can share it, as oneDNN's own global scratchpad mode does.
    The same array comes back call after call, so the memory object stays pointed at it
    (``Primitive.run``): a fresh buffer per call cost an allocation and a re-pointing, 3-4 us of a
    small convolution's 15.
    """
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = _scratch.buffer = np.empty(-(-nbytes // 4), np.float32)
    return buffer


def dense_order(array: np.ndarray) -> tuple[int, ...] | None:
    """The axis order in which ``array``'s elements lie row-major in memory with no gaps (``(0, 2, 3, 1)``
    for an NHWC buffer seen as NCHW, as a transpose leaves it), or None where they do not.  Axes of size
    1 come first: their strides say nothing (a batch of one seen through a transpose keeps whatever
    stride it had, 1024 bytes beside a W stride of 1024)."""
    order = tuple(sorted(range(array.ndim), key=lambda axis: (array.shape[axis] != 1, -array.strides[axis])))
    return order if array.transpose(order).flags.c_contiguous else None


def memory_ordered(array: np.ndarray) -> np.ndarray:
    """``array`` with its axes in the order its elements lie in memory (the same elements, no copy), or
    itself where they do not lie densely: what a sum over all of them (a guard's norm) reads in one pass
    rather than gathering across memory.  An axis read backwards (a reversed view: JAX's flipped kernel of
    a transposed conv) is read forwards."""
    if any(stride < 0 for stride in array.strides):
        array = array[tuple(slice(None, None, -1) if stride < 0 else slice(None) for stride in array.strides)]
    order = dense_order(array)
    return array if order is None else array.transpose(order)


def copied_in_memory_order(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` whose axes lie in the order the original's lie in memory, forwards (a permuted view
    of a C-contiguous array, which ``in_strides`` reads): copying a reversed view axis by axis as it is indexed
    gathers across memory; copied in memory order, whole rows move at once (JAX's flipped 128 x 64 x 2 x 2
    kernel of a transposed conv: 28 us as indexed)."""
    order = sorted(range(array.ndim), key=lambda axis: -abs(array.strides[axis]))
    back = [0] * array.ndim
    for position, axis in enumerate(order):
        back[axis] = position
    return np.ascontiguousarray(array.transpose(order)).transpose(back)


def dense_strides(shape, order) -> list[int]:
    """The strides, in elements, of a tensor of ``shape`` whose axes lie row-major in ``order``: axes of size
    1 get the stride their place gives them, so oneDNN sees a format it knows (acdb for NHWC) rather than
    a generic strided one (a (1, 256, 56, 56) view of a (1, 3136, 256) array, PVT-v2's Mix-FFN: its
    reorder to nChw16c took 0.83 ms as a generic one against 0.20 as acdb, 1 thread)."""
    strides, step = [0] * len(shape), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= shape[axis]
    return strides


def in_strides(library: Library, array: np.ndarray, layouts: dict, shape=None) -> tuple[Layout, np.ndarray] | None:
    """A float32 ``array`` whose elements lie densely in some axis order, as (a layout that reads it by its
    strides, the same memory as a row-major array) for a reorder to take without a copy first; None
    where it does not lie so.  ``shape`` views the same strides with the first dim split in groups.
    ``layouts`` keeps the layouts made, by shape and strides: making one costs 7.5 us, and a model hands
    a conv the same view call after call (at most ``MAX_PLANS`` are kept)."""
    order = dense_order(array)
    if order is None:
        return None
    strides = dense_strides(array.shape, order)
    if shape is not None and len(shape) == array.ndim + 1:  # (groups, out / groups, ...): split dim 0
        strides = [strides[0] * shape[1], *strides]
    key = (tuple(shape or array.shape), tuple(strides))
    layout = layouts.get(key)
    if layout is None:
        if len(layouts) >= MAX_PLANS:
            layouts.clear()
        layout = layouts[key] = Layout.strided(library, key[0], key[1])
    return layout, array.transpose(order)


def reference_or_gemm(implementation: str) -> bool:
    """Whether oneDNN's name for a kernel (``jit_1x1:avx512_core``, ``x64:gemm:jit``, ``ref:any``, or a fused
    pair's ``ref_fused_convolution:any:jit_1x1:avx512_core:jit_dw:avx512_core``) names a reference loop or
    a GEMM, in whole or in part."""
    return any(part in ("ref", "gemm") for part in implementation.split(":"))


def address(buffer: np.ndarray) -> int:
    """The address of a C-contiguous array's data: 0.6 us through ctypes' buffer view, against 2.7 us for
    ``buffer.ctypes.data``, which a read-only or empty array still takes."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    except (TypeError, ValueError):
        return buffer.ctypes.data


def pads_after(windows, positions, kernel, stride, dilation, pads_before) -> list[int]:
    """The right padding per spatial dim that makes oneDNN's rule ``windows = (positions + before +
    after - span) / stride + 1`` hold exactly (span = dilation * (kernel - 1) + 1, dilation as PyTorch
    counts it): the part the last window uses, negative where a floor rule drops input."""
    return [(count - 1) * s + d * (k - 1) + 1 - size - before
            for count, size, k, s, d, before in zip(windows, positions, kernel, stride, dilation, pads_before)]


class Reorders:
    """The reorders an object makes between layouts, each made once per (source, target, thread count) and
    kept (the last ``MAX_PLANS``): making one costs a primitive search, a model asks for the same ones
    call after call."""

    def __init__(self, library: Library):
        self.library = library
        self.kept: list[tuple[Layout, Layout, int, Primitive]] = []  # (from, to, threads, primitive)

    def get(self, source: Layout, target: Layout, threads: int) -> Primitive:
        for kept_source, kept_target, kept_threads, step in self.kept:
            if kept_threads == threads and kept_source == source and kept_target == target:
                return step
        self.library.set_threads(threads)  # a primitive runs on the thread count it was made for
        step = reorder(self.library, source, target)
        self.kept = [*self.kept[1 - MAX_PLANS:], (source, target, threads, step)]
        return step


def reorder(library: Library, source: Layout, target: Layout) -> Primitive:
    """A primitive that copies data from one layout into another."""
    with Attributes(library) as attributes:
        return Primitive(library, lambda pointer: library.reorder_primitive_desc_create(
            pointer, source.handle, library.engine, target.handle, library.engine, attributes.handle), "reorder")


class Attributes:
    """A primitive's attributes, for the time the primitive is made: the scratchpad passed per call, and
    the post-ops applied to its output in order: ``("sum",)`` adds what the output buffer held before
    the call, ``("depthwise", kernel, stride, padding)`` runs a depthwise convolution over it (its weight
    and bias passed with the call, ``ARG_POST_OP_DW`` or-ed with their argument numbers), ``("mul",)`` and
    ``("add",)`` multiply by or add a tensor of ``operand``'s layout passed with the call (argument
    ``post_op_argument(index, ARG_SRC_1)``), ``(algorithm, alpha, beta)`` an element-wise function (oneDNN's
    names: ``eltwise_relu``)."""

    def __init__(self, library: Library, post_ops=(), operand: Layout | None = None):
        self.library = library
        self.handle = Handle()
        self.post_ops = Handle()
        library.check(library.primitive_attr_create(ctypes.byref(self.handle)), "attributes")
        library.check(library.primitive_attr_set_scratchpad_mode(self.handle, library.scratchpad_user), "scratchpad")
        if post_ops:
            library.check(library.post_ops_create(ctypes.byref(self.post_ops)), "post-ops")
            for step in post_ops:
                if step[0] == "sum":
                    status = library.post_ops_append_sum(self.post_ops, 1.0, 0, library.undefined_type)
                elif step[0] == "depthwise":  # ("depthwise", kernel, stride, left padding): a fused depthwise conv
                    status = library.post_ops_append_dw(self.post_ops, library.f32, library.f32, library.f32,
                                                        *step[1:])
                elif step[0] in ("mul", "add"):
                    if operand is None:
                        raise OneDnnError(f"a binary {step[0]} post-op needs the layout of its second operand")
                    algorithm = library.binary_mul if step[0] == "mul" else library.binary_add
                    status = library.post_ops_append_binary(self.post_ops, algorithm, operand.handle)
                else:
                    name, alpha, beta = step
                    status = library.post_ops_append_eltwise(self.post_ops, library.alg_kind(name), alpha, beta)
                library.check(status, f"post-op {step[0]}")
            library.check(library.primitive_attr_set_post_ops(self.handle, self.post_ops), "post-ops")

    def __enter__(self) -> Attributes:
        return self

    def __exit__(self, *exc_info) -> None:
        if self.post_ops:
            self.library.post_ops_destroy(self.post_ops)
        self.library.primitive_attr_destroy(self.handle)
