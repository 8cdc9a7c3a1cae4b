"""Compare kuiper's rng-bit-generator with XLA's (through jax) over algorithms, shapes and states.

Needs jax (not a kuiper dependency): ``pip install jax``, then ``python tools/check_hlo_random_bits.py``.
Prints each mismatch and exits 1 if there is one. (jax takes u64[2] states only.)
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import kuiper

jax.config.update("jax_enable_x64", True)
ALGORITHMS = {"rng_philox": lax.RandomAlgorithm.RNG_PHILOX, "rng_three_fry": lax.RandomAlgorithm.RNG_THREE_FRY,
              "rng_default": lax.RandomAlgorithm.RNG_DEFAULT}
SHAPES = [(), (1,), (4,), (7,), (2, 3), (3, 5), (5, 3), (3, 3, 2), (1, 9)]
TYPES = {"uint32": "u32", "uint64": "u64"}  # jax asks for unsigned bits only
STATES = [[1, 2], [0xDEADBEEF12345678, 0xFFFFFFFFFFFFFFFE], [0, 2**64 - 1]]


def kuiper_bits(state, shape, dtype, algorithm):
    dims = ",".join(map(str, shape))
    text = (f"HloModule rng\nENTRY main {{\n  s = u64[2] parameter(0)\n"
            f"  ROOT r = (u64[2], {TYPES[dtype]}[{dims}]) rng-bit-generator(s), algorithm={algorithm}\n}}")
    return kuiper.load_hlo(text, backend="numpy")(np.array(state, np.uint64), to_numpy=True)


def main() -> int:
    checked = mismatches = 0
    for algorithm, jax_algorithm in ALGORITHMS.items():
        for shape in SHAPES:
            for dtype in TYPES:
                for state in STATES:
                    xla_state, xla_bits = lax.rng_bit_generator(jnp.array(state, jnp.uint64), shape,
                                                                dtype=jnp.dtype(dtype), algorithm=jax_algorithm)
                    state_out, bits = kuiper_bits(state, shape, dtype, algorithm)
                    checked += 1
                    if not (np.array_equal(np.asarray(xla_bits), bits) and np.array_equal(np.asarray(xla_state),
                                                                                          state_out)):
                        mismatches += 1
                        print(f"mismatch: {algorithm} {dtype}{list(shape)} state={state}")
    print(f"{checked - mismatches}/{checked} cases give XLA's bits and state (jax {jax.__version__})")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
