"""Where a native kernel's output array comes from: ``output_array(shape, dtype)``.

A model's execution plan (kuiper/graph/memory_plan.py) lays the values of a warm call out in one
arena per thread, made once, so that a call in steady state allocates nothing but the arrays it
returns (issue 44: a call a device can replay).  A kernel takes part by asking ``output_array``
for each array it allocates (its output, a scratch array), in an order that depends only on the
shapes it runs: while the plan runs a step, it offers that step's planned buffers here, in the
order the step asked for arrays when the plan recorded it, and a request whose shape and dtype
match its offered buffer gets that buffer; anything else gets a fresh ``np.empty``, so a kernel
called outside a plan, with other shapes, or on a path the recording did not take, is never wrong.

This module holds only the per-thread offer and the recorder; it knows nothing of graphs.
"""

from __future__ import annotations

import threading

import numpy as np

# The fewest elements a result must have for a specialized step that NumPy would let allocate (a ufunc,
# a dot) to ask output_array instead: below it, the ask costs more (0.15-0.3 us) than the allocation, and
# the smallest steps are a loop body's, which no plan serves.
PLANNED_MIN_ELEMENTS = 4096


class _Offer(threading.local):
    """This thread's state: the running step's offered buffers and how many it has taken, or the list a
    recording call collects the step's requests in."""

    buffers: tuple | None = None  # in request order; None where a request is not planned
    position = 0
    recorded: list | None = None
    busy = False  # a planned or recording call runs on this thread (a model called inside it plans nothing)


_offer = _Offer()


def output_array(shape: tuple, dtype) -> np.ndarray:
    """An uninitialised array of ``shape`` and ``dtype``: the running step's planned buffer for this
    request when one is offered and fits, else a fresh one."""
    offer = _offer
    buffers = offer.buffers
    if buffers is not None:
        position = offer.position
        offer.position = position + 1
        if position < len(buffers):
            buffer = buffers[position]
            if buffer is not None and buffer.dtype == dtype and buffer.shape == (
                    shape if type(shape) is tuple else _as_shape(shape)):
                return buffer
        return np.empty(shape, dtype)
    array = np.empty(shape, dtype)
    if offer.recorded is not None:
        offer.recorded.append(array)
    return array


def _as_shape(shape) -> tuple:
    """A shape given as an int or a list, as the tuple an array's ``shape`` is."""
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(size) for size in shape)


def offer_state() -> _Offer:
    """This thread's offer, which a plan's call sets itself: ``busy`` while it runs (a model called from
    inside one of its ops then plans nothing), and around each planned step ``buffers`` (``position`` back
    to 0), None after it.  Attribute stores, where a function call each cost a small model 3 us a call."""
    return _offer


def start_recording() -> None:
    """Collect the arrays ``output_array`` hands out on this thread until ``stop_recording``."""
    _offer.recorded = []


def stop_recording() -> list[np.ndarray]:
    """The arrays handed out since ``start_recording``, in request order; recording stops."""
    recorded, _offer.recorded = _offer.recorded or [], None
    return recorded
