"""The primitives the array API standard lacks, written in the standard: every backend's fallback.

A backend is an array-API namespace plus these few primitives.  A backend whose library has
them natively (NumPy's ``np.pad``, ``sliding_window_view``, ``einsum``, ``add.at``) overrides
them; any other namespace (array-api-strict, PyTorch's or JAX's through array-api-compat) gets
these, which use only functions and indexing the standard defines.  They copy where a native
version would give a view (a sliding window here is a stacked copy, ``window`` times the
input), so they are correct everywhere and fast nowhere: a backend that cares overrides them.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..errors import KuiperError

# Budget for the one-hot block of scatter_add: indices x target positions compared at a time.
SCATTER_BLOCK = 1 << 22


def pad(xp, x, pads: Sequence[tuple[int, int]], mode: str = "constant", value: float = 0.0):
    """Pad every axis by (before, after); mode is constant (also "zeros"), reflect, replicate or circular."""
    if not any(before or after for before, after in pads):
        return x
    if mode in ("constant", "zeros"):
        shape = tuple(n + before + after for n, (before, after) in zip(x.shape, pads))
        out = xp.full(shape, value, dtype=x.dtype, device=x.device)
        out[tuple(slice(before, before + n) for n, (before, _) in zip(x.shape, pads))] = x
        return out
    for axis, (before, after) in enumerate(pads):
        if before or after:
            x = xp.take(x, _pad_indices(xp, x.shape[axis], before, after, mode, x.device), axis=axis)
    return x


def _pad_indices(xp, n: int, before: int, after: int, mode: str, device):
    """The source index of each position of one padded axis."""
    positions = xp.arange(-before, n + after, device=device)
    if mode == "replicate":
        return xp.clip(positions, 0, n - 1)
    if mode == "circular":
        return xp.remainder(positions, n)
    if mode == "reflect":  # mirror about the first and last element, which are not repeated
        if n == 1:
            return xp.zeros_like(positions)
        folded = xp.remainder(positions, 2 * (n - 1))
        return xp.where(folded < n, folded, 2 * (n - 1) - folded)
    raise KuiperError(f"padding mode {mode!r}: expected constant, reflect, replicate or circular")


def sliding_window(xp, x, window: Sequence[int], axes: Sequence[int]):
    """Every window of ``x`` along ``axes``, the window dimensions appended (as NumPy's
    ``sliding_window_view``), built as a stack of shifted slices: a copy, not a view."""
    rank = x.ndim
    for size, axis in zip(window, axes):
        axis %= rank  # the original axes keep their places: window dimensions go after them
        count = x.shape[axis] - size + 1
        if count < 1:
            raise KuiperError(f"sliding window of {size} over an axis of {x.shape[axis]}: the window is longer")
        lead = (slice(None),) * axis
        x = xp.stack([x[lead + (slice(k, k + count), ...)] for k in range(size)], axis=-1)
    return x


def einsum(xp, equation: str, *operands):
    """Einstein summation by products of pairs: each pair becomes one batched ``matmul``."""
    inputs, output = _parse_einsum(equation, operands)
    arrays = [_diagonals_and_sums(xp, array, letters, "".join(inputs[:i] + inputs[i + 1 :]) + output)
              for i, (array, letters) in enumerate(zip(operands, inputs))]
    array, letters = arrays[0]
    for index in range(1, len(arrays)):
        later = "".join(inputs[index + 1 :]) + output
        array, letters = _contract(xp, array, letters, *arrays[index], later)
    return xp.permute_dims(array, tuple(letters.index(letter) for letter in output))


def _parse_einsum(equation: str, operands) -> tuple[list[str], str]:
    """The letters of each operand and of the output, with ``...`` spelled as capital letters."""
    equation = equation.replace(" ", "")
    left, arrow, output = equation.partition("->")
    inputs = left.split(",")
    if len(inputs) != len(operands):
        raise KuiperError(f"einsum {equation!r} names {len(inputs)} operands; {len(operands)} were given")
    ellipsis_rank = max((operand.ndim - len(spec.replace("...", "")) for spec, operand in zip(inputs, operands)
                         if "..." in spec), default=0)
    broadcast = "".join(chr(ord("A") + i) for i in range(ellipsis_rank))
    spelled = []
    for spec, operand in zip(inputs, operands):
        if "..." in spec:
            spec = spec.replace("...", broadcast[ellipsis_rank - (operand.ndim - len(spec) + 3):])
        if len(spec) != operand.ndim:
            raise KuiperError(f"einsum {equation!r}: operand {spec!r} has {operand.ndim} dimensions")
        spelled.append(spec)
    if not arrow:
        counts = "".join(spelled)
        output = "".join(sorted(letter for letter in set(counts) if counts.count(letter) == 1 and letter.islower()))
        output = broadcast + output
    return spelled, output.replace("...", broadcast)


def _diagonals_and_sums(xp, array, letters: str, read_elsewhere: str):
    """``array`` with a repeated letter reduced to its diagonal and a letter nothing else reads summed."""
    for letter in sorted(set(letters)):
        while letters.count(letter) > 1:
            first, second = letters.index(letter), letters.index(letter, letters.index(letter) + 1)
            array = xp.moveaxis(array, (first, second), (-2, -1))
            rest = letters[:first] + letters[first + 1 : second] + letters[second + 1 :]
            size = array.shape[-1]
            flat = xp.reshape(array, array.shape[:-2] + (size * size,))
            array = flat[..., :: size + 1]
            letters = rest + letter
    summed = tuple(i for i, letter in enumerate(letters) if letter not in read_elsewhere)
    if summed:
        array = xp.sum(array, axis=summed)
        letters = "".join(letter for letter in letters if letter in read_elsewhere)
    return array, letters


def _contract(xp, a, a_letters: str, b, b_letters: str, later: str):
    """The product of two operands, summing the letters they share that nothing after them reads."""
    shared = [letter for letter in a_letters if letter in b_letters]
    batch = [letter for letter in shared if letter in later]
    summed = [letter for letter in shared if letter not in later]
    a_only = [letter for letter in a_letters if letter not in b_letters]
    b_only = [letter for letter in b_letters if letter not in a_letters]
    sizes = {letter: n for letters, array in ((a_letters, a), (b_letters, b)) for letter, n in zip(letters, array.shape)}
    for letter in batch:  # a length-1 batch dimension broadcasts against the other operand's
        sizes[letter] = max(a.shape[a_letters.index(letter)] if letter in a_letters else 1,
                            b.shape[b_letters.index(letter)])

    def arrange(array, letters, rows, columns):
        array = xp.permute_dims(array, tuple(letters.index(letter) for letter in batch + rows + columns))
        batch_shape = tuple(array.shape[: len(batch)])
        return xp.reshape(array, batch_shape + (math.prod(sizes[l] for l in rows), math.prod(sizes[l] for l in columns)))

    left = arrange(a, a_letters, a_only, summed)
    right = arrange(b, b_letters, summed, b_only)
    product = xp.matmul(left, right)
    shape = tuple(product.shape[: len(batch)]) + tuple(sizes[l] for l in a_only + b_only)
    return xp.reshape(product, shape), "".join(batch + a_only + b_only)


def scatter_add(xp, target, indices, values):
    """Add ``values`` into the 1-D ``target`` at ``indices`` in place; repeated indices accumulate.

    The standard has no scatter: each block of indices becomes a one-hot matrix whose product
    with the values sums every contribution to a position.
    """
    n = target.shape[0]
    positions = xp.arange(n, dtype=indices.dtype, device=target.device)
    block = max(1, SCATTER_BLOCK // max(n, 1))
    total = xp.zeros_like(target)
    for start in range(0, indices.shape[0], block):
        stop = min(start + block, indices.shape[0])  # the standard refuses a slice past the end
        one_hot = xp.astype(xp.expand_dims(indices[start:stop], axis=1) == positions, target.dtype)
        total = total + xp.matmul(xp.astype(values[start:stop], target.dtype), one_hot)
    target[...] = target + total
    return target


def put(xp, target, indices, values):
    """Write ``values`` into the 1-D ``target`` at ``indices`` in place; of repeated indices, the last
    value stays (as NumPy's assignment does).

    The standard has no scatter: a stable sort of the indices puts each position's last write
    at the end of its run, which ``searchsorted`` finds for every position at once.
    """
    if indices.shape[0] == 0:
        return target
    order = xp.argsort(indices, stable=True)
    sorted_indices, sorted_values = xp.take(indices, order), xp.take(values, order)
    positions = xp.arange(target.shape[0], dtype=indices.dtype, device=target.device)
    last = xp.clip(xp.searchsorted(sorted_indices, positions, side="right") - 1, 0, None)
    written = xp.take(sorted_indices, last) == positions
    target[...] = xp.where(written, xp.astype(xp.take(sorted_values, last), target.dtype), target)
    return target


def softmax(xp, x, axis: int):
    """softmax along ``axis``; subtracting the max keeps exp from overflowing."""
    x = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return x / xp.sum(x, axis=axis, keepdims=True)
