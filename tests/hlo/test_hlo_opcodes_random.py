"""rng-bit-generator gives XLA's bits; rng gives numbers of the distribution asked for.

References: the Random123 known-answer vectors for Philox4x32-10 and Threefry2x32-20 (Salmon et
al., SC 2011), and outputs of XLA's CPU backend (jax 0.10.2, ``lax.rng_bit_generator`` with the
state [1, 2]; tools/check_hlo_random_bits.py compares many more where jax is installed).
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.ops.random_bits import philox4x32, threefry2x32


def words(*values):
    return [np.array([v], np.uint64) for v in values]


@pytest.mark.parametrize("counter, key, expected", [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox4x32_10_known_answers(counter, key, expected):
    assert tuple(int(w[0]) for w in philox4x32(np, words(*counter), key)) == expected


@pytest.mark.parametrize("counter, key, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry2x32_20_known_answers(counter, key, expected):
    assert tuple(int(w[0]) for w in threefry2x32(np, words(*counter), key)) == expected


def generate(algorithm: str, bits: str):
    text = f"""HloModule rng
ENTRY main {{
  s = u64[2] parameter(0)
  ROOT r = (u64[2], {bits}) rng-bit-generator(s), algorithm={algorithm}
}}"""
    state, values = kuiper.load_hlo(text, backend="numpy")(np.uint64([1, 2]), to_numpy=True)
    return [int(v) for v in state], [int(v) for v in np.asarray(values).reshape(-1)]


XLA_OUTPUTS = [  # (algorithm, bits shape, new state, bits), from XLA's CPU backend
    ("rng_philox", "u32[5]", [1, 4], [0x7D34A749, 0xA9B8BBE8, 0x7BA423D7, 0x2FB324D9, 0x6CF923FE]),
    ("rng_default", "u32[3,2]", [1, 4], [0x7D34A749, 0xA9B8BBE8, 0x7BA423D7, 0x2FB324D9, 0x6CF923FE, 0xBADF79C3]),
    ("rng_philox", "u64[3]", [1, 4], [0xA9B8BBE87D34A749, 0x2FB324D97BA423D7, 0xBADF79C36CF923FE]),
    ("rng_three_fry", "u32[5]", [1, 5], [0x0296E954, 0x802FD53B, 0xED3492D3, 0xDF435003, 0x63B40BD3]),
    ("rng_three_fry", "u32[3]", [1, 4], [0x0296E954, 0x802FD53B, 0xED3492D3]),
    ("rng_three_fry", "u64[3]", [1, 5], [0x802FD53B0296E954, 0xDF435003ED3492D3, 0xFCC0F26163B40BD3]),
    ("rng_three_fry", "u32[3,2]", [1, 5], [0x0296E954, 0x802FD53B, 0xED3492D3, 0xDF435003, 0x63B40BD3,
                                           0xFCC0F261]),
]


@pytest.mark.parametrize("algorithm, bits, state, values", XLA_OUTPUTS)
def test_rng_bit_generator_gives_xlas_bits_and_state(algorithm, bits, state, values):
    assert generate(algorithm, bits) == (state, values)


def rng(distribution: str, element_type: str, a: str, b: str, count: int = 20000):
    text = f"""HloModule rng
ENTRY main {{
  a = {element_type}[] constant({a})
  b = {element_type}[] constant({b})
  ROOT r = {element_type}[{count}] rng(a, b), distribution={distribution}
}}"""
    return np.asarray(kuiper.load_hlo(text, backend="numpy")(to_numpy=True))


def test_rng_uniform_floats_and_integers_stay_in_their_range():
    values = rng("rng_uniform", "f32", "-2", "3")
    assert values.dtype == np.float32 and values.min() >= -2 and values.max() < 3
    assert abs(values.mean() - 0.5) < 0.05  # the mean of U(-2, 3), 5 / sqrt(12 * 20000) = 0.01 its deviation
    integers = rng("rng_uniform", "s32", "-3", "4")
    assert integers.dtype == np.int32 and set(np.unique(integers)) == set(range(-3, 4))


def test_rng_normal_has_the_mean_and_deviation_asked_for():
    values = rng("rng_normal", "f32", "1", "2", count=20001)
    assert values.dtype == np.float32 and values.shape == (20001,)
    assert abs(values.mean() - 1) < 0.05 and abs(values.std() - 2) < 0.05


def test_stochastic_convert_rounds_up_when_the_random_bits_are_below_the_fraction():
    text = """HloModule sc
ENTRY main {
  x = f32[8] parameter(0)
  r = u32[8] parameter(1)
  ROOT s = s8[8] stochastic-convert(x, r)
}"""
    x = np.float32([2.25, 2.25, -2.25, -2.25, 3.0, 1000, -1000, 126.75])
    quarter = 2**30  # 0.25 * 2**32
    r = np.uint32([quarter - 1, quarter, quarter - 1, quarter, 0, 0, 0, 2**32 - 1])
    got = kuiper.load_hlo(text, backend="numpy")(x, r, to_numpy=True)
    # 2.25: up when r < 0.25 * 2**32; the sign comes back after; an exact 3 never rounds up (0 < 0 is
    # false); out of range gives the limits; 126.75 with r at its largest stays 126.
    np.testing.assert_array_equal(got, [3, 2, -3, -2, 3, 127, -128, 126])
    assert got.dtype == np.int8
