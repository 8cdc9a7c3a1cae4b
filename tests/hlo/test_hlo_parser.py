"""The HLO parser on hand-written corner cases, bad text, and fuzzed text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuiper.errors import HloSyntaxError, ModelFormatError
from kuiper.hlo import parse
from kuiper.hlo.literals import literal_array
from kuiper.hlo.module import ELIDED, Slice
from kuiper.hlo.shapes import ArrayShape, TupleShape

UNOPTIMISED = """HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0})->(f32[2,3]{1,0}, s32[])}

region_0.1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.1 = f32[] add(a, b)
}

ENTRY main.2 {
  x.1 = f32[2,3]{1,0} parameter(0)
  c = f32[] constant(0)
  r = f32[2]{0} reduce(x.1, c), dimensions={1}, to_apply=region_0.1
  i = s32[] constant(-7)
  ROOT t = (f32[2,3]{1,0}, s32[]) tuple(x.1, i)
}
"""

OPTIMISED = """HloModule jit_g, is_scheduled=true, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

FileNames
1 "/tmp/a.py"

FunctionNames
1 "g"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=8 end_column=30}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  %constant.1 = f32[] constant(2)
  %broadcast.1 = f32[4]{0} broadcast(%constant.1), dimensions={}
  ROOT %multiply.0 = f32[4]{0} multiply(%param_0, %broadcast.1), metadata={op_name="jit(g)/mul" stack_frame_id=1}
}

ENTRY %main.3 (x.1: f32[4]) -> f32[4] {
  %x.1 = f32[4]{0} parameter(0), metadata={op_name="x"}, sharding={replicated}
  ROOT %fusion = f32[4]{0} fusion(%x.1), kind=kLoop, calls=%fused_computation, backend_config={"outer_dimension_partitions":[],"flag":{"a":"1"}}, frontend_attributes={_xla_x="y"}
}
"""


def test_unoptimised_form():
    module = parse(UNOPTIMISED)
    assert module.name == "jit_f"
    assert list(module.computations) == ["region_0.1", "main.2"]
    entry = module.entry
    assert entry.name == "main.2" and entry.is_entry
    reduce = entry.by_name["r"]
    assert reduce.operands == ["x.1", "c"]
    assert reduce.attributes == {"dimensions": [1], "to_apply": "region_0.1"}
    assert reduce.called_computations() == ["region_0.1"]
    assert entry.root.name == "t"
    assert entry.root.shape == TupleShape((ArrayShape("f32", (2, 3), (), entry.root.shape.elements[0].layout),
                                           ArrayShape("s32", ())))
    assert literal_array(entry.by_name["i"]).item() == -7


def test_optimised_form_with_preambles_and_skipped_attributes():
    module = parse(OPTIMISED)
    assert module.attributes["is_scheduled"] == "true"
    entry = module.entry
    assert entry.parameter_shapes[0][0] == "x.1"
    assert str(entry.result_shape) == "f32[4]"
    fusion = entry.root
    assert fusion.attributes["kind"] == "kLoop"
    assert fusion.attributes["calls"] == "fused_computation"
    assert fusion.attributes["backend_config"] == {"outer_dimension_partitions": [], "flag": {"a": "1"}}
    assert fusion.attributes["frontend_attributes"] == {"_xla_x": "y"}
    assert module.computations["fused_computation"].root.attributes["metadata"]["stack_frame_id"] == 1


def _one(instruction_line: str, extra: str = "") -> object:
    text = f"HloModule m\n{extra}\nENTRY e {{\n  p = f32[2,3] parameter(0)\n  ROOT {instruction_line}\n}}\n"
    return parse(text, verify=False).entry.root


@pytest.mark.parametrize(
    "text, expected",
    [
        ("f32[]", "f32[]"),
        ("pred[1,2]", "pred[1,2]"),
        ("bf16[3]{0}", "bf16[3]{0}"),
        ("f8e4m3fn[2,2]{0,1}", "f8e4m3fn[2,2]{0,1}"),
        ("f32[2,<=3]", "f32[2,<=3]"),
        ("f32[?,3]", "f32[?,3]"),
        ("f32[8,128]{1,0:T(8,128)S(1)}", "f32[8,128]{1,0:T(8,128)S(1)}"),
        ("(f32[2], (s32[], u8[4]{0}))", "(f32[2], (s32[], u8[4]{0}))"),
        ("()", "()"),
        ("c128[2]", "c128[2]"),
        ("token[]", "token[]"),
    ],
)
def test_shapes(text, expected):
    assert str(_one(f"x = {text} custom-call(), custom_call_target=\"foo\"").shape) == expected


@pytest.mark.parametrize(
    "shape, literal, expected",
    [
        ("f32[]", "1.5", np.float32(1.5)),
        ("f32[3]", "{inf, -inf, 1e-05}", np.array([np.inf, -np.inf, 1e-5], np.float32)),
        ("pred[2,2]", "{ {true, false}, {false, true} }", np.array([[1, 0], [0, 1]], bool)),
        ("s8[2]", "{-128, 127}", np.array([-128, 127], np.int8)),
        ("u64[]", "18446744073709551615", np.uint64(18446744073709551615)),
        ("c64[2]", "{(1, 2), (3, -4)}", np.array([1 + 2j, 3 - 4j], np.complex64)),
        ("f32[0]", "{}", np.zeros((0,), np.float32)),
        ("f32[1,1,2]", "{ { {1, 2} } }", np.array([[[1, 2]]], np.float32)),
    ],
)
def test_literals(shape, literal, expected):
    root = _one(f"c = {shape} constant({literal})")
    value = literal_array(root)
    assert value.dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(value, expected)


def test_nan_literal():
    assert math.isnan(literal_array(_one("c = f32[] constant(nan)")).item())


def test_elided_constant_parses_but_says_how_to_dump_it():
    root = _one("c = f32[100] constant({...})")
    assert root.literal is ELIDED
    with pytest.raises(HloSyntaxError, match="print_large_constants"):
        literal_array(root)


def test_literal_count_mismatch():
    with pytest.raises(HloSyntaxError, match="3 value"):
        literal_array(_one("c = f32[2] constant({1, 2, 3})"))


def test_tuple_constant_and_attribute_forms():
    root = _one("c = (f32[], s32[2]) constant((1, {2, 3}))")
    assert root.literal == (1, [2, 3])
    root = _one("s = f32[1,2] slice(p), slice={[0:1], [1:3:1]}, /*index=5*/ metadata={op_name=\"a b\"}")
    assert root.attributes["slice"] == [Slice(0, 1), Slice(1, 3, 1)]
    root = _one("c = f32[1,1,1,1] convolution(p, p), window={size=3x3 stride=2x2 pad=1_1x0_-1 rhs_dilate=2x1}, "
                "dim_labels=b01f_01io->b01f, feature_group_count=1")
    assert root.attributes["window"] == {"size": "3x3", "stride": "2x2", "pad": "1_1x0_-1", "rhs_dilate": "2x1"}
    assert root.attributes["dim_labels"] == "b01f_01io->b01f"
    root = _one("a = f32[2,3] all-reduce(p), replica_groups=[1,2]<=[2], to_apply=e, channel_id=1 // comment")
    assert root.attributes["channel_id"] == 1
    root = _one("a = f32[2,3] add(f32[2,3] %p, f32[2,3]{1,0} %p)")
    assert root.operands == ["p", "p"]


@pytest.mark.parametrize(
    "text, line, column, message",
    [
        ("HloModel m\nENTRY e {\n ROOT p = f32[] parameter(0)\n}", 1, 10, "or 'HloModule' at the start"),
        ("HloModule m\nENTRY e {\n  ROOT p = f33[] parameter(0)\n}", 3, 12, "expected a shape"),
        ("HloModule m\nENTRY e {\n  ROOT p = f32[2 parameter(0)\n}", 3, 18, "',' or ']'"),
        ("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n", 4, 1, "not closed"),
        ("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) $\n}", 3, 31, "unexpected character"),
        ("HloModule m\nENTRY e {\n  ROOT a = f32[] negate(b)\n}", 3, 3, "does not define"),
        ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[] call(p), to_apply=nowhere\n}", 4, 3,
         "calls computation 'nowhere'"),
        ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[3] add(p, p)\n}", 4, 3,
         "does not match"),
        ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[3] get-tuple-element(p), index=0\n}", 4, 3,
         "tuple-shaped"),
        ("HloModule m\nENTRY e {\n  p = f32[2] parameter(1)\n  ROOT a = f32[2] negate(p)\n}", 3, 3, "expected 0..0"),
        ("HloModule m\nENTRY e {\n  p = f32[] constant(\"x\")\n}", 3, 22, "literal"),
        # A layout that does not order the dims (found by fuzzing: bitcast read it as a permutation).
        ("HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{1,1} parameter(0)\n}", 3, 12, "not an order of the 2"),
        ("HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{2,0:T(8)} parameter(0)\n}", 3, 12, "not an order of the 2"),
    ],
)
def test_errors_point_at_line_and_column(text, line, column, message):
    with pytest.raises(HloSyntaxError, match=message) as info:
        parse(text)
    assert isinstance(info.value, ModelFormatError)
    assert (info.value.line, info.value.column) == (line, column)
    assert "^" in str(info.value)


_PIECES = ["HloModule", "m", "ENTRY", "ROOT", "e", "{", "}", "(", ")", "[", "]", ",", "=", "f32", "s32[]",
           "parameter(0)", "add", "p", "1", "-2", "0.5", "->", ":", "\n", "  ", '"s"', "/*c*/", "{...}",
           "dimensions={1}", "3x3", "b01f_01io->b01f", "%x", "tuple", "constant", "<=", "?", "#", "\"", "/*"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_fuzz_every_text_parses_or_raises_hlo_syntax_error(pieces):
    text = " ".join(pieces)
    try:
        parse(text)
    except HloSyntaxError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(OPTIMISED) - 1), st.text(max_size=3))
def test_fuzz_mutated_module(position, insert):
    text = OPTIMISED[:position] + insert + OPTIMISED[position + 1 :]
    try:
        parse(text)
    except HloSyntaxError:
        pass


def test_records_that_are_not_plain_pairs_parse_token_by_token():
    root = _one('x = f32[2,3] custom-call(p), custom_call_target="f", frontend_attributes={"a", "b"}, '
                'metadata={op_name="n" deduplicated_name=m profile_type={1}}')
    assert root.attributes["frontend_attributes"] == ["a", "b"]
    assert root.attributes["metadata"]["profile_type"] == [1]
    with pytest.raises(HloSyntaxError) as info:
        _one('x = f32[2,3] custom-call(p), custom_call_target="f", metadata={op_name="n" = })')
    assert info.value.line == 5
