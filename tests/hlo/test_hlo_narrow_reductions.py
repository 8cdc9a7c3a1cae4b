"""Reductions of f16, bf16 and the 8-bit floats accumulate as on XLA's CPU backend.

XLA's CPU backend keeps such a reduction in its element type, so every step rounds to the type,
and its compiler first splits a reduction longer than 32 into windows of 32 (TreeReductionRewriter:
"same" padding, half of it low) whose sums are then summed. kuiper/hlo/tree_reductions.py does the
same; each expected value below is worked out by hand from that rule, and the comments say how.
(tools/check_hlo_opcodes_against_xla.py compares such reductions with XLA itself.)
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import kuiper
from kuiper.hlo import parse
from kuiper.hlo.tree_reductions import split_long_reductions

TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f32": np.float32}


def _sum(element_type: str, dims: str, rows: int | None = None, reducer: str = "add") -> str:
    operand = f"{element_type}[{dims}]"
    result = f"{element_type}[{rows}]" if rows is not None else f"{element_type}[]"
    reduced = "1" if rows is not None else ",".join(str(d) for d in range(len(dims.split(","))))
    return (f"HloModule m\nr {{\n  a = {element_type}[] parameter(0)\n  b = {element_type}[] parameter(1)\n"
            f"  ROOT s = {element_type}[] {reducer}(a, b)\n}}\nENTRY e {{\n  x = {operand} parameter(0)\n"
            f"  z = {element_type}[] constant(0)\n  ROOT o = {result} reduce(x, z), dimensions={{{reduced}}}, to_apply=r\n}}\n")


def _run(text: str, x: np.ndarray) -> float:
    return float(np.asarray(kuiper.load_hlo(text, backend="numpy")(x, to_numpy=True)).reshape(-1)[0])


def _big_then_ones(element_type: str, big: float, count: int, big_last: bool = False) -> np.ndarray:
    x = np.ones(count, np.float32)
    x[-1 if big_last else 0] = big
    return x.astype(TYPES[element_type])


@pytest.mark.parametrize("element_type, big, count, big_last, expected", [
    # 2048 + 1 is a tie in f16 (spacing 2), which rounds to the even 2048: every later 1 is lost.
    ("f16", 2048, 3, False, 2048), ("f16", 2048, 32, False, 2048),
    # ones first: 1 + 1 = 2 is exact, 2 + 2048 = 2050 too.
    ("f16", 2048, 3, True, 2050),
    # 33 elements: two windows of 32, padded 15 low and 16 high: [15 pads, 2048, 16 ones] sums to 2048,
    # [16 ones, 16 pads] to 16; 2048 + 16 = 2064 (a sum in f32, rounded once, would be 2080).
    ("f16", 2048, 33, False, 2064),
    # 1000: 32 windows, padded 12 and 12: [12 pads, 2048, 19 ones] -> 2048, 30 windows of 32 ones -> 32
    # each, [20 ones, 12 pads] -> 20; 2048 + 30 * 32 + 20 = 3028, every step exact (spacing 2 below 4096).
    ("f16", 2048, 1000, False, 3028),
    # bf16 has 8 significant bits: 256 + 1 ties to 256.
    ("bf16", 256, 3, False, 256), ("bf16", 256, 3, True, 258),
    # f8e4m3fn has 4: 16 + 1 ties to 16. With 1000: each window of ones stops at 16 (16 + 1 ties to 16),
    # and the 32 window sums 16 + 16 + ... reach 256, where 256 + 16 ties to 256 (spacing 32); a sum in
    # f32 would be 1015, past the type's largest value 448: NaN.
    ("f8e4m3fn", 16, 3, False, 16), ("f8e4m3fn", 16, 1000, False, 256),
])
def test_a_narrow_sum_rounds_each_step_in_xlas_groups(element_type, big, count, big_last, expected):
    x = _big_then_ones(element_type, big, count, big_last)
    assert _run(_sum(element_type, str(count)), x) == expected


def test_bf16_ones_still_count_past_256_when_the_windows_keep_sums_small():
    # 300 ones: 10 windows (padded 10 and 10) of 22, 32 x 8 and 22 ones; their sums 22 + 32 * 8 + 22 = 300
    # stay on bf16's grid (spacing 2 from 256 to 512): 300, where one long bf16 chain would stop at 256.
    assert _run(_sum("bf16", "300"), np.ones(300, ml_dtypes.bfloat16)) == 300


def test_each_row_of_a_reduce_rounds_alone():
    x = np.ones((3, 40), np.float16)
    x[0, 4], x[2, 39] = 2048, 1024
    # Two windows a row, padded 12 and 12. Row 0: [12 pads, 4 ones, 2048, 15 ones] -> 4 + 2048 = 2052, and
    # 2052 + 1 ties to the even 2052 (1026 * 2); [20 ones, 12 pads] -> 20; 2072. Row 1: 20 + 20 = 40.
    # Row 2: 20 + (19 + 1024) = 1063, all exact (spacing 1 below 2048).
    got = kuiper.load_hlo(_sum("f16", "3,40", rows=3), backend="numpy")(x, to_numpy=True)
    assert got.tolist() == [2072, 40, 1063]


def test_a_reduce_window_of_bf16_rounds_each_step():
    text = ("HloModule m\nr {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n  ROOT s = bf16[] add(a, b)\n}\n"
            "ENTRY e {\n  x = bf16[6] parameter(0)\n  z = bf16[] constant(0)\n"
            "  ROOT o = bf16[2] reduce-window(x, z), window={size=3 stride=3}, to_apply=r\n}\n")
    x = np.array([256, 1, 1, 1, 1, 256], ml_dtypes.bfloat16)
    # [256, 1, 1]: 257 ties to 256 twice; [1, 1, 256]: 2 + 256 = 258, exact.
    assert kuiper.load_hlo(text, backend="numpy")(x, to_numpy=True).astype(np.float32).tolist() == [256, 258]


def test_f32_sums_are_left_to_numpy():
    module = parse(_sum("f32", "1000"))
    assert split_long_reductions(module) is module  # no windows: pairwise sums are as accurate


def test_the_split_mirrors_xlas_windows_and_padding():
    module = split_long_reductions(parse(_sum("f16", "5,40,1100")))
    windows = [i for i in module.entry.instructions if i.opcode == "reduce-window"]
    # 40 -> 2 windows of 32 (24 pads: 12 and 12); 1100 -> 35 (20 pads: 10, 10) -> 2 (29 pads: 14, 15)
    assert [str(w.shape) for w in windows] == ["f16[1,2,35]", "f16[1,1,2]"]
    assert windows[0].attributes["window"] == {"size": "5x32x32", "stride": "5x32x32", "pad": "0_0x12_12x10_10"}
    assert windows[1].attributes["window"] == {"size": "1x2x32", "stride": "1x2x32", "pad": "0_0x0_0x14_15"}
    assert module.entry.root.opcode == "reduce" and module.entry.root.operands[0] == windows[1].name


def test_an_empty_reduced_dim_gives_the_init_value_and_is_not_split():
    text = _sum("f16", "0,40").replace("constant(0)", "constant(1.5)")  # dims {0, 1}: 0 and 40 elements
    assert split_long_reductions(parse(text)).entry.instructions == parse(text).entry.instructions
    got = kuiper.load_hlo(text, backend="numpy")(np.zeros((0, 40), np.float16), to_numpy=True)
    assert got.shape == () and float(got) == 1.5
