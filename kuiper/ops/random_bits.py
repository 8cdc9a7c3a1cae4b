"""RandomBits: counter-based random bits, bit for bit as XLA's rng-bit-generator makes them.

The state is a u64 vector: word 0 is the key, the rest a counter. ``philox`` is Philox4x32-10 and
``threefry`` Threefry2x32-20 (Salmon et al., SC 2011: "Parallel random numbers: as easy as 1, 2,
3"); the two outputs are the advanced state and the bits, of ``dtype`` (32- or 64-bit integers)
and ``shape``. How words are laid out follows XLA's expansion of the instruction:

* philox: the key splits into two 32-bit words (low first). With a u64[2] state the 128-bit
  counter is (low = state[1], high = state[0]), with u64[3] (state[1], state[2]). Counter
  c, c+1, ... each give four 32-bit words, taken in order; a 64-bit value joins two (low first).
  The new state is the key and the counter advanced by the blocks used (only its low word
  when the state has two words).
* threefry: the key splits as above; element i of the result (row-major) encrypts the counter
  ``state[1] + i``, split into two words. 64-bit values join the two output words; 32-bit
  values come from half as many blocks, the two output words filling the two halves of the
  first dim of even size (XLA's split). The new state's counter is advanced by the blocks used.
"""

from __future__ import annotations

from ..ir.dtypes import array_dtype
from .base import Op, prod
from .params import Choice, Ints

MASK32 = 0xFFFFFFFF
PHILOX_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
THREEFRY_PARITY = 0x1BD11BDA


def philox4x32(xp, counter: list, key: tuple):
    """Philox4x32-10 of four uint64 arrays holding 32-bit words, under the key (k0, k1) (ints)."""
    k0, k1 = key
    x0, x1, x2, x3 = counter
    mask = xp.uint64(MASK32)
    for _ in range(10):
        product0 = x0 * xp.uint64(PHILOX_MULTIPLIERS[0])
        product1 = x2 * xp.uint64(PHILOX_MULTIPLIERS[1])
        x0, x1, x2, x3 = ((product1 >> xp.uint64(32)) ^ x1 ^ xp.uint64(k0), product1 & mask,
                          (product0 >> xp.uint64(32)) ^ x3 ^ xp.uint64(k1), product0 & mask)
        k0, k1 = (k0 + PHILOX_KEY_STEPS[0]) & MASK32, (k1 + PHILOX_KEY_STEPS[1]) & MASK32
    return [x0, x1, x2, x3]


def threefry2x32(xp, counter: list, key: tuple):
    """Threefry2x32-20 of two uint64 arrays holding 32-bit words, under the key (k0, k1) (ints)."""
    mask = xp.uint64(MASK32)
    schedule = (key[0], key[1], THREEFRY_PARITY ^ key[0] ^ key[1])
    x0 = (counter[0] + xp.uint64(schedule[0])) & mask
    x1 = (counter[1] + xp.uint64(schedule[1])) & mask
    for group in range(5):
        for rotation in THREEFRY_ROTATIONS[4 * (group % 2):4 * (group % 2) + 4]:
            x0 = (x0 + x1) & mask
            x1 = ((x1 << xp.uint64(rotation)) | (x1 >> xp.uint64(32 - rotation))) & mask
            x1 = x0 ^ x1
        x0 = (x0 + xp.uint64(schedule[(group + 1) % 3])) & mask
        x1 = (x1 + xp.uint64(schedule[(group + 2) % 3] + group + 1)) & mask
    return [x0, x1]


def split_words(xp, values):
    """uint64 values -> (low 32 bits, high 32 bits), each held in uint64."""
    return values & xp.uint64(MASK32), values >> xp.uint64(32)


def even_split(shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """XLA's halving of a shape for 32-bit threefry: (the dim split, the half shape)."""
    if not shape:
        return 0, (1,)
    dim = next((i for i, size in enumerate(shape) if size % 2 == 0), None)
    if dim is None:
        dim = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = list(shape)
    half[dim] = -(-shape[dim] // 2)
    return dim, tuple(half)


def _key(words: list[int]) -> tuple[int, int]:
    return words[0] & MASK32, words[0] >> 32


def philox_bits(xp, words: list[int], shape: tuple[int, ...], wide: bool):
    """Philox bits for ``shape`` (flat, row-major) from the state ``words``, and the new state."""
    count = prod(shape)
    blocks = -(-count * (2 if wide else 1) // 4)
    low, high = (words[1], words[0]) if len(words) == 2 else (words[1], words[2])
    counter_low = xp.uint64(low) + xp.arange(blocks, dtype=xp.uint64)  # wraps, carrying into high
    counter_high = xp.uint64(high) + (counter_low < xp.uint64(low)).astype(xp.uint64)
    x = philox4x32(xp, [*split_words(xp, counter_low), *split_words(xp, counter_high)], _key(words))
    if wide:
        pairs = [x[0] | (x[1] << xp.uint64(32)), x[2] | (x[3] << xp.uint64(32))]
        bits = xp.reshape(xp.stack(pairs, axis=1), (-1,))[:count]
    else:
        bits = xp.reshape(xp.stack(x, axis=1), (-1,))[:count].astype(xp.uint32)
    new_low = (low + blocks) % 2**64
    new_high = (high + (new_low < low)) % 2**64
    return bits, [words[0], new_low] + ([new_high] if len(words) == 3 else [])


def threefry_bits(xp, words: list[int], shape: tuple[int, ...], wide: bool):
    """Threefry bits of ``shape`` from the state ``words``, and the new state."""
    if wide:
        count = prod(shape)
        counter = xp.uint64(words[1]) + xp.arange(count, dtype=xp.uint64)
        x = threefry2x32(xp, list(split_words(xp, counter)), _key(words))
        return x[0] | (x[1] << xp.uint64(32)), [words[0], (words[1] + count) % 2**64]
    dim, half = even_split(shape)
    count = prod(half)
    counter = xp.uint64(words[1]) + xp.arange(count, dtype=xp.uint64)
    x0, x1 = (xp.reshape(word.astype(xp.uint32), half)
              for word in threefry2x32(xp, list(split_words(xp, counter)), _key(words)))
    if not shape:
        return x0[0], [words[0], (words[1] + count) % 2**64]
    joined = list(half)
    joined[dim] *= 2
    bits = xp.reshape(xp.stack([x0, x1], axis=dim + 1), tuple(joined))  # the two words side by side
    return bits[tuple(slice(0, size) for size in shape)], [words[0], (words[1] + count) % 2**64]


class RandomBits(Op):
    """Input: the u64 state. Outputs: the new state and random bits of ``shape`` and ``dtype``."""

    types = ("RandomBits",)
    arity = 1
    fresh_output = True
    params = (Choice("algorithm", ("philox", "threefry")), Ints("shape", default=(), low=0),
              Choice("dtype", ("uint32", "int32", "uint64", "int64")))

    def setup(self):
        self.wide = self.dtype.endswith("64")

    def forward(self, state):
        xp = self.xp
        words = [int(word) for word in self.backend.to_numpy(state).reshape(-1)]
        sizes = (2, 3) if self.algorithm == "philox" else (2,)
        if len(words) not in sizes:
            raise self.error(f"{self.algorithm} needs a u64 state of {' or '.join(map(str, sizes))} words, "
                             f"found {len(words)}")
        make = philox_bits if self.algorithm == "philox" else threefry_bits
        bits, new_state = make(xp, words, self.shape, self.wide)
        bits = xp.reshape(bits, self.shape)
        return xp.asarray(new_state, dtype=xp.uint64), bits.view(array_dtype(xp, self.dtype))


class RandomNumbers(Op):
    """Inputs ``a, b``: ``uniform`` numbers in [a, b) or ``normal`` ones with mean a and deviation b.

    The bits are Philox's from a fixed state (XLA's ``rng`` leaves its generator and seed to the
    backend, so no two backends agree); they become numbers as XLA's rng library makes them: the
    top mantissa bits as a fraction in [0, 1), the remainder of the bits by the range for integers
    (as ``a + half + (rest)`` so that the range may exceed the signed type), and Box-Muller pairs
    for normals.
    """

    types = ("RandomNumbers",)
    arity = 2
    fresh_output = True
    STATE = (0, 0)
    params = (Choice("distribution", ("uniform", "normal")), Ints("shape", default=(), low=0),
              Choice("dtype", ("float32", "float64", "int32", "uint32", "int64", "uint64")))

    def setup(self):
        if self.distribution == "normal" and not self.dtype.startswith("float"):
            raise self.unsupported("dtype", self.dtype, "float32, float64 for normal numbers")
        wide = self.dtype.endswith("64")
        self.bit_type = "uint64" if wide else "uint32"
        self.wide = wide
        self.count = prod(self.shape) + (prod(self.shape) % 2 if self.distribution == "normal" else 0)

    def forward(self, a, b):
        xp = self.xp
        bits = philox_bits(xp, list(self.STATE), (self.count,), self.wide)[0]
        if self.dtype.startswith("float"):
            mantissa = 52 if self.dtype == "float64" else 23
            width = 64 if self.dtype == "float64" else 32
            fraction = (bits >> array_dtype(xp, self.bit_type)(width - mantissa)).astype(self.dtype) * 2.0 ** -mantissa
            fraction = fraction.astype(self.dtype)
            if self.distribution == "uniform":
                return xp.reshape(fraction * (b - a) + a, self.shape).astype(self.dtype)
            half = self.count // 2
            radius = xp.sqrt(-2 * xp.log(xp.maximum(fraction[:half], 1e-7)))
            angle = 2 * xp.pi * fraction[half:]
            normal = xp.concatenate([xp.sin(angle) * radius, xp.cos(angle) * radius])[:prod(self.shape)]
            return xp.reshape(normal * b + a, self.shape).astype(self.dtype)
        unsigned = array_dtype(xp, self.bit_type)
        span = xp.asarray(b).astype(self.dtype).view(unsigned) - xp.asarray(a).astype(self.dtype).view(unsigned)
        if int(span) == 0:
            raise self.error(f"needs a < b for uniform integers, found a={a}, b={b}")
        distance = bits % span
        half = distance >> unsigned(1)
        values = xp.asarray(a).astype(self.dtype) + half.view(self.dtype) + (distance - half).view(self.dtype)
        return xp.reshape(values, self.shape)


OPS = [RandomBits, RandomNumbers]
