"""HLO text as XLA writes it and accepts it: the forms beyond JAX's dumps, streaming, nesting, fuzzing.

Each case is written here in the spirit of one class of XLA's parser tests (modules without a
header, nested instructions, comments everywhere, ...); expected values are worked out by hand.
"""

from __future__ import annotations

import math
import os
import re
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kuiper
from kuiper.errors import HloSyntaxError, KuiperError
from kuiper.hlo import parse
from kuiper.hlo.literals import literal_array
from kuiper.hlo.shapes import ArrayShape, TupleShape
from kuiper.hlo.token_stream import MAX_NESTING

FUZZ = settings(
    max_examples=int(os.environ.get("KUIPER_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize="KUIPER_FUZZ_EXAMPLES" not in os.environ,  # CI: the same examples every run
    database=None,
)


# -- modules without a header, and where the entry is --------------------------------------------
def test_a_module_without_header_takes_entry_as_its_entry():
    module = parse("helper {\n  ROOT p = f32[] parameter(0)\n}\nENTRY main {\n  ROOT c = f32[] constant(2)\n}\n"
                   "last {\n  ROOT q = s32[] parameter(0)\n}")
    assert module.entry.name == "main"
    assert module.name == "module_main"


def test_a_module_without_header_or_entry_takes_the_last_computation():
    module = parse("first {\n  ROOT p = f32[] parameter(0)\n}\nsecond {\n  ROOT q = s32[3] parameter(0)\n}")
    assert module.entry.name == "second"
    assert module.entry.root.shape == ArrayShape("s32", (3,))


def test_an_old_header_ends_with_a_colon():
    module = parse("HloModule old_style:\n\nENTRY e {\n  ROOT c = f32[] constant(1)\n}")
    assert module.name == "old_style"


def test_comments_anywhere_and_lit_run_lines_first():
    text = """// RUN: some-tool %s | FileCheck %s
/* a block
   comment */ ENTRY /* here */ e {  // and here
  p /*name*/ = f32[2] /*shape*/ parameter(0) // trailing
  ROOT n = f32[2] negate(/*operand*/ p)
}  // end
"""
    module = parse(text)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "negate"]
    assert kuiper.load_hlo(text) is not None


# -- XLA's non-round-trip forms: nested instructions, shapes left out ------------------------------
def test_nested_instructions_become_instructions_before_their_user():
    module = parse("ENTRY e {\n  ROOT r = f32[4] add(f32[4] parameter(0), multiply(f32[4] parameter(1), "
                   "f32[4] parameter(2)))\n}")
    entry = module.entry
    opcodes = [i.opcode for i in entry.instructions]
    assert opcodes == ["parameter", "parameter", "parameter", "multiply", "add"]
    root = entry.root
    assert root.name == "r"
    assert [entry.by_name[o].opcode for o in root.operands] == ["parameter", "multiply"]
    # The nested multiply had no shape written: it takes its operands' shape.
    assert entry.by_name[root.operands[1]].shape == ArrayShape("f32", (4,))


def test_shapes_left_out_are_inferred_for_elementwise_tuple_and_get_tuple_element():
    module = parse("""ENTRY e {
  a = s32[2,3] parameter(0)
  b = s32[2,3] parameter(1)
  lt = compare(a, b), direction=LT
  m = maximum(a, b)
  t = tuple(lt, m)
  ROOT g = get-tuple-element(t), index=1
}""")
    by_name = module.entry.by_name
    assert by_name["lt"].shape == ArrayShape("pred", (2, 3))
    assert by_name["t"].shape == TupleShape((ArrayShape("pred", (2, 3)), ArrayShape("s32", (2, 3))))
    assert by_name["g"].shape == ArrayShape("s32", (2, 3))


def test_compact_tuple_element_operands_become_get_tuple_elements_made_once():
    text = """ENTRY e {
  p = (f32[2], (s32[2], f32[2])) parameter(0)
  a = f32[2] negate(f32[2] %p#0)
  b = f32[2] multiply(p#1#1, f32[2] p#1#1)
  ROOT r = (f32[2], s32[2]) tuple(add(a, b), %p#1#0)
}"""
    entry = parse(text).entry
    made = [(i.name, i.operands, i.attributes["index"]) for i in entry.instructions if i.opcode == "get-tuple-element"]
    assert made == [("p#0", ["p"], 0), ("p#1", ["p"], 1), ("p#1#1", ["p#1"], 1), ("p#1#0", ["p#1"], 0)]
    assert entry.by_name["b"].operands == ["p#1#1", "p#1#1"]
    x, i, y = np.float32([1, -2]), np.int32([7, 8]), np.float32([3, 0.5])
    # Tuple parameters are fed flat; build the tuple inside to run it.
    model = kuiper.load_hlo(text.replace("p = (f32[2], (s32[2], f32[2])) parameter(0)",
                                         "x = f32[2] parameter(0)\n  i = s32[2] parameter(1)\n"
                                         "  y = f32[2] parameter(2)\n  q = (s32[2], f32[2]) tuple(i, y)\n"
                                         "  p = (f32[2], (s32[2], f32[2])) tuple(x, q)"))
    first, second = model(x, i, y, to_numpy=True)
    np.testing.assert_array_equal(first, [-1 + 9, 2 + 0.25])  # -x + y*y
    np.testing.assert_array_equal(second, [7, 8])


@pytest.mark.parametrize("operand, message", [
    ("%p#2", "tuple index 2 is out of range"),
    ("%p#0#0", "'p#0' is f32[2], not a tuple"),
    ("%x#0", "'x' is f32[2], not a tuple"),
    ("%p#a", "a tuple index after '#'"),
    ("%p#-1", "tuple index -1 is out of range"),
    ("%later#0", "'later' must be defined before"),
])
def test_a_compact_tuple_element_of_no_tuple_element_is_an_error_at_its_column(operand, message):
    text = f"ENTRY e {{\n  p = (f32[2], f32[2]) parameter(0)\n  x = f32[2] parameter(1)\n  ROOT r = f32[2] negate({operand})\n}}"
    with pytest.raises(HloSyntaxError, match=re.escape(message)) as info:
        parse(text)
    assert info.value.line == 4 and info.value.column >= 26


@pytest.mark.parametrize("groups, message", [
    ("mesh['x'=2,'y'=2] {'z'}", "axis 'z' is not a valid axis name or index"),
    ("mesh['x'=2,'y'=2] {'5'}", "axis index 5 is out of bounds"),
    ("mesh['x'=2,'y'=2, device_ids=(0,1,2)] {'x'}", "device_ids lists 3 devices, but the mesh axes"),
    ("mesh['x'=2,'y'=2, device_ids=([8])] {'x'}", "device_ids lists 8 devices"),
    ("mesh['x'=2 'y'=2] {'x'}", "']' to end the mesh axes"),
    ("maximal_mesh[device=0]", "expected device_id="),
])
def test_bad_mesh_replica_groups_are_errors_at_their_column(groups, message):
    text = (f"add {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}}\n"
            f"ENTRY e {{\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(p), replica_groups={groups}, "
            f"to_apply=add\n}}")
    with pytest.raises(HloSyntaxError, match=re.escape(message)) as info:
        parse(text)
    assert info.value.line == 8 and info.value.column > 40


def test_frontend_attributes_hold_strings_or_any_balanced_braces():
    module = parse('HloModule m, frontend_attributes={xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}, k="v"}\n'
                   'ENTRY e {\n  ROOT p = f32[2] parameter(0), frontend_attributes={a={b={"c"}}, d="e"}\n}')
    assert module.attributes["frontend_attributes"] == {"xla.sdy.meshes": "{empty_mesh = #sdy.mesh<[]>}", "k": "v"}
    assert module.entry.root.attributes["frontend_attributes"] == {"a": '{b={"c"}}', "d": "e"}
    for bad, message in (("{k=1}", "a string or '{' for frontend attribute 'k'"),
                         ('{k={x} m="n"}', "'}' at the end of frontend attributes")):
        with pytest.raises(HloSyntaxError, match=re.escape(message)):
            parse(f"ENTRY e {{\n  ROOT p = f32[2] parameter(0), frontend_attributes={bad}\n}}")


def test_scan_and_scaled_dot_parse_and_are_refused_when_run():
    text = """s {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] add(a, b)
  ROOT t = (f32[], f32[]) tuple(c, c)
}
ENTRY e {
  x = f32[4] parameter(0)
  i = f32[] parameter(1)
  ROOT r = (f32[4], f32[]) scan(x, i), dimensions={0}, num_carries=1, to_apply=s
}"""
    assert parse(text).entry.root.opcode == "scan"
    with pytest.raises(KuiperError, match="r in e: scan"):
        kuiper.load_hlo(text)
    with pytest.raises(HloSyntaxError, match="takes 4 operand"):
        parse("ENTRY e {\n  a = f8e4m3fn[2,4] parameter(0)\n  ROOT d = f32[2,2] scaled-dot(a, a)\n}")


def test_inferred_shapes_change_type_where_the_opcode_does():
    module = parse("ENTRY e {\n  x = f32[3] parameter(0)\n  f = is-finite(x)\n  ROOT c = complex(x, x)\n}")
    assert module.entry.by_name["f"].shape == ArrayShape("pred", (3,))
    assert module.entry.root.shape == ArrayShape("c64", (3,))
    with pytest.raises(HloSyntaxError, match="'convert' needs its shape"):
        parse("ENTRY e {\n  x = f32[3] parameter(0)\n  ROOT c = convert(x)\n}")


def test_a_shape_that_cannot_be_inferred_is_asked_for():
    with pytest.raises(HloSyntaxError, match="'reshape' needs its shape written out") as info:
        parse("ENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT d = reshape(a), dimensions={1}\n}")
    assert (info.value.line, info.value.column) == (3, 12)
    with pytest.raises(HloSyntaxError, match="as many contracting dims") as info:  # XLA's shape rule refuses it
        parse("ENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT d = dot(a, a), lhs_contracting_dims={1}\n}")
    assert (info.value.line, info.value.column) == (3, 12)


# -- computations written in place: to_apply={ ... } ----------------------------------------------------
NESTED = """HloModule m
ENTRY e {
  p0 = f32[3,4] parameter(0)
  c0 = f32[] constant(0)
  r = f32[3] reduce(p0, c0), dimensions={1}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT maximum = f32[] maximum(a, b)
  }
  ROOT s = f32[3] reduce-window(r, c0), window={size=2 pad=0_1}, to_apply={ROOT x = f32[] add(f32[] parameter(0), f32[] parameter(1))}
}"""


def test_a_computation_written_in_place_is_read_and_runs():
    module = parse(NESTED)
    assert list(module.computations) == ["_", "_.1", "e"] and module.entry.name == "e"  # XLA names them "_"
    assert module.entry.by_name["r"].attributes["to_apply"] == "_"
    assert module.computations["_"].root.opcode == "maximum"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)  # row maxima 3, 7, 11; windows of 2, the last padded
    assert kuiper.load_hlo(NESTED)(x, to_numpy=True).tolist() == [3 + 7, 7 + 11, 11]


def test_a_computation_written_in_place_must_close_and_hold_instructions():
    with pytest.raises(HloSyntaxError, match="not closed"):
        parse(NESTED.replace("ROOT x = f32[] add(f32[] parameter(0), f32[] parameter(1))}\n}", "ROOT x = f32[] "
                             "add(f32[] parameter(0), f32[] parameter(1))\n"))
    with pytest.raises(HloSyntaxError):  # its instructions are checked as any others
        parse(NESTED.replace("ROOT maximum = f32[] maximum(a, b)", "ROOT maximum = f32[] maximum(a, c)"))


# -- buffer shapes: b(f32[2,4]), what XLA's Pin and CreateBuffer custom calls give ----------------------
def test_buffer_shapes_parse_and_print():
    module = parse("HloModule m\nENTRY e {\n  p = b(f32[4,16]{1,0}) parameter(0)\n"
                   "  c = s32[] constant(1)\n"
                   "  pin = b(s32[]) custom-call(c), custom_call_target=\"Pin\", output_to_operand_aliasing={{}: (0, {})}\n"
                   "  ROOT t = (b(f32[4,16]), b(s32[])) tuple(p, pin)\n}")
    p, pin = module.entry.by_name["p"], module.entry.by_name["pin"]
    assert p.shape.buffer and p.shape.dims == (4, 16) and p.shape.layout.minor_to_major == (1, 0)
    assert pin.shape == ArrayShape("s32", (), buffer=True) and str(pin.shape) == "b(s32[])"
    assert not module.entry.by_name["c"].shape.buffer
    assert str(module.entry.root.shape) == "(b(f32[4,16]), b(s32[]))"


@pytest.mark.parametrize("shape, message", [
    ("b()", "expected a shape"), ("b(s32[], f32[])", "'\\)' at the end of the buffer shape"),
    ("b((f32[2]))", "holds one array shape, found \\(f32\\[2\\]\\)"), ("b(token[])", "holds one array shape"),
    ("b(b(f32[]))", "holds one array shape, found b\\(f32\\[\\]\\)"),
])
def test_buffer_shapes_xla_refuses(shape, message):
    with pytest.raises(HloSyntaxError, match=message) as info:
        parse(f"ENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}")
    assert (info.value.line, info.value.column) > (2, 11)


def test_a_module_with_buffer_shapes_is_refused_at_load_naming_each_instruction():
    text = "ENTRY e {\n  p = b(f32[2]) parameter(0)\n  ROOT c = b(f32[2]) copy(p)\n}"
    with pytest.raises(kuiper.errors.UnsupportedOperatorError, match="buffer shape b\\(f32\\[2\\]\\)") as info:
        kuiper.load_hlo(text)
    assert "p in e" in str(info.value) and "c in e" in str(info.value)


def test_an_instruction_named_b_is_no_buffer_shape():
    model = kuiper.load_hlo("ENTRY e {\n  b = f32[2] parameter(0)\n  ROOT r = f32[2] add(b, b)\n}")
    assert model(np.float32([1, 2.5]), to_numpy=True).tolist() == [2, 5]


# -- literals and attribute values -------------------------------------------------------------------
def test_nan_payloads_are_kept_bit_for_bit_in_constants():
    """XLA's NanPayload test: sign, an all-ones exponent, the payload as mantissa (bf16: 7 bits)."""
    module = parse("ENTRY e {\n  ROOT c = bf16[3] constant({-nan(0x7f), -nan(0x3f), nan(0x1)})\n}")
    bits = literal_array(module.entry.root).view(np.uint16)
    np.testing.assert_array_equal(bits, [0x8000 | 0x7F80 | 0x7F, 0x8000 | 0x7F80 | 0x3F, 0x7F80 | 0x1])
    f32 = parse("ENTRY e {\n  ROOT c = f32[1] constant({nan(0x400001)})\n}")
    assert literal_array(f32.entry.root).view(np.uint32)[0] == 0x7F800000 | 0x400001
    for literal, message in (("bf16[1] constant({nan(0x80)})", "does not fit the 7 mantissa bits"),
                             ("f32[1] constant({nan(0x0)})", "does not fit"),
                             ("f8e4m3fn[1] constant({nan(0x1)})", "NaN payload where a f8e4m3fn value")):
        with pytest.raises(HloSyntaxError, match=message):
            parse(f"ENTRY e {{\n  ROOT c = {literal}\n}}")


def test_negative_nan_and_scalar_fill_literals():
    module = parse("ENTRY e {\n  n = f32[3] constant({-nan, nan, -inf})\n  ROOT f = s8[2,2] constant(7)\n}")
    values = literal_array(module.entry.by_name["n"])
    assert np.isnan(values[:2]).all() and math.copysign(1.0, values[0]) == -1.0 and values[2] == -np.inf
    np.testing.assert_array_equal(literal_array(module.entry.by_name["f"]), np.full((2, 2), 7, np.int8))


def test_u64_minus_one_wraps_as_in_xla():
    module = parse("ENTRY e {\n  ROOT c = u64[2] constant({-1, 5})\n}")
    np.testing.assert_array_equal(literal_array(module.entry.root), np.array([2**64 - 1, 5], np.uint64))


def test_values_at_the_edge_of_a_float_type_round_to_it():
    # 65519 rounds to f16's largest value 65504 (XLA accepts it); 65520 would round to infinity.
    module = parse("ENTRY e {\n  ROOT c = f16[2] constant({65519, -65504})\n}")
    np.testing.assert_array_equal(literal_array(module.entry.root), np.array([65504, -65504], np.float16))


def test_layouts_with_sparse_and_index_type_suffixes_parse():
    module = parse("ENTRY e {\n  ROOT p = f32[4,4]{1,0:D(D,C+~)#(u32)} parameter(0)\n}")
    assert module.entry.root.shape.layout.extra == "D(D,C+~)#(u32)"
    sparse = parse("ENTRY e {\n  ROOT p = f32[4,4]{1,0:D(D,S)T(2,2)P(f32[4,4])} parameter(0)\n}")
    assert sparse.entry.root.shape.layout.extra == "D(D,S)T(2,2)P(f32[4,4])"


@pytest.mark.parametrize("layout, message, at", [
    ("{1,0:D(X,C)}", "expected a DimLevelType abbreviation (D, C, S or H), found 'X'", "X"),
    ("{1,0:D(D C)}", "',' or ')' in the dim level types", "C)"),
    ("{1,0:T(128,8)P(f32[4,4])}", "physical shape P(...), but is not for a sparse array", "P("),
    ("{1,0:D(D,D)P(f32[4,4])}", "physical shape P(...), but is not for a sparse array", "P("),
])
def test_bad_dim_level_types_and_a_dense_physical_shape_are_errors_at_their_column(layout, message, at):
    line = f"  ROOT p = f32[4,4]{layout} parameter(0)"
    with pytest.raises(HloSyntaxError, match=re.escape(message)) as info:
        parse(f"ENTRY e {{\n{line}\n}}")
    assert (info.value.line, info.value.column) == (2, line.index(at) + 1)


def test_quoted_keys_and_iota_device_lists_in_attribute_values_parse():
    module = parse('ENTRY e {\n  p = f32[4] parameter(0)\n  ROOT g = f32[4] all-gather(p), dimensions={0}, '
                   'replica_groups={{"x"=0,"y"=1},{"x"=1,"y"=0}}, device_list=[2,2]<=[4]T(1,0)\n}')
    assert module.entry.root.opcode == "all-gather"


def test_bitcast_convert_between_widths_changes_rank():
    parse("ENTRY e {\n  p = s32[10] parameter(0)\n  ROOT b = s8[10,4] bitcast-convert(p)\n}")
    parse("ENTRY e {\n  p = f16[10,2] parameter(0)\n  ROOT b = f32[10] bitcast-convert(p)\n}")
    with pytest.raises(HloSyntaxError, match="width ratio"):
        parse("ENTRY e {\n  p = s32[10] parameter(0)\n  ROOT b = s8[10,2] bitcast-convert(p)\n}")


def test_an_entry_signature_may_list_more_parameters_than_the_body_uses():
    # XLA reads the signature's result shape, not its parameter list.
    module = parse("HloModule m\nENTRY e (a: f32[2], b: s32[], c: f32[]) -> f32[2] {\n"
                   "  ROOT a = f32[2] parameter(0)\n}")
    assert len(module.entry.parameters()) == 1


# -- streaming and nesting ------------------------------------------------------------------------------
def test_an_error_early_in_a_large_text_is_found_at_once_without_memory():
    body = "  x = f32[2] parameter(0)\n" * 400_000  # ~10 MB that would lex into 2.8 million tokens
    text = "HloModule m\n= ENTRY e {\n" + body + "}\n"
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(HloSyntaxError) as info:
            parse(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (info.value.line, info.value.column) == (2, 1)
    assert time.process_time() - started < 1.0
    assert peak < 1_000_000  # no token list: a few objects, not the whole text again


@pytest.mark.parametrize("make", [
    lambda n: "ENTRY e {\n  ROOT p = " + "(" * n + "f32[]" + ")" * n + " parameter(0)\n}",
    lambda n: "ENTRY e {\n  ROOT c = f32[1] constant(" + "{" * n + "1" + "}" * n + ")\n}",
    lambda n: "ENTRY e {\n  ROOT p = f32[] parameter(0), meta=" + "{" * n + "}" * n + "\n}",
    lambda n: "ENTRY e {\n  ROOT p = f32[] parameter(0), meta=" + "[(" * n + ")]" * n + "\n}",
    lambda n: "ENTRY e {\n  ROOT r = f32[] " + "negate(" * n + "f32[] parameter(0)" + ")" * n + "\n}",
])
def test_deep_nesting_is_an_error_naming_line_and_column_not_a_recursion_error(make):
    with pytest.raises(HloSyntaxError, match="nest more than") as info:
        parse(make(50_000))
    assert info.value.line in (2, 3) and info.value.column > 1
    parse(make(5), verify=False)  # shallow nesting of the same kind parses


def test_nesting_up_to_the_budget_parses():
    shape = "(" * MAX_NESTING + "f32[]" + ")" * MAX_NESTING
    module = parse(f"ENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}")
    assert module.entry.root.shape.is_tuple


def test_a_key_that_is_not_a_name_is_an_error():
    # Found by fuzzing: ``{{}=1}`` made a list a dict key (TypeError).
    with pytest.raises(HloSyntaxError, match="expected a name or number before '='") as info:
        parse("ENTRY e {\n  ROOT p = f32[] parameter(0), meta={{}=1}\n}")
    assert (info.value.line, info.value.column) == (2, 38)  # the inner "{"


# -- fuzzing: only KuiperError may escape ----------------------------------------------------------------
_PIECES = ["HloModule", "m", "ENTRY", "ROOT", "e", "{", "}", "(", ")", "[", "]", ",", "=", "f32", "s32[]",
           "f16[2]{0}", "(f32[], s8[1])", "parameter(0)", "constant", "add", "negate", "tuple", "get-tuple-element",
           "async-start", "async-done", "conditional", "concatenate", "bitcast-convert", "custom-call", "p", "x",
           "1", "-2", "0.5", "1e400", "-nan", "inf", "->", ":", "\n", "  ", '"s"', "/*c*/", "// c\n", "{...}",
           "index=0", "dimensions={}", "dimensions={0}", "padding=0_0", "3x3", "%x", "<=", "?", "#", "~", "@",
           "\"", "/*", "u4[]", "c64[]", "(1e100, 0)", "api_version=X", "result_accuracy={mode=high}",
           "control-predecessors={q}", "input_output_alias={ {0}: (0, {}) }", "calls=e", "to_apply=e",
           # the forms issue 48 added: mesh groups, quoted axes, frontend attributes, updates, layouts
           "mesh", "maximal_mesh", "'x'", "'0'", "replica_groups=", "frontend_attributes=", "#sdy.mesh<[]>",
           "async-update", "D(", "C+", "P(", "T(2)", "scan", "%p#0", "#1", "'", "device_ids=", "all-reduce"]


@FUZZ
@given(st.lists(st.sampled_from(_PIECES), max_size=60))
def test_fuzz_the_grammar_only_raises_kuiper_errors(pieces):
    try:
        parse(" ".join(pieces))
    except KuiperError:
        pass


_VALID = """HloModule fuzz
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main (p: f32[2,3]) -> (f32[2], s32[]) {
  p = f32[2,3]{1,0} parameter(0)
  z = f32[] constant(0)
  r = f32[2]{0} reduce(p, z), dimensions={1}, to_apply=add, metadata={op_name="r"}
  c = s32[] constant(-7)
  ROOT t = (f32[2]{0}, s32[]) tuple(r, c)
}
"""


@FUZZ
@given(st.integers(0, len(_VALID) - 1), st.integers(0, 3), st.text(alphabet="{}()[],=:%#-0123456789aefs\n ",
                                                                   max_size=4))
def test_fuzz_a_mutated_module_only_raises_kuiper_errors(position, removed, inserted):
    try:
        parse(_VALID[:position] + inserted + _VALID[position + removed :])
    except KuiperError:
        pass


_VALID_NEWER = """HloModule fuzz2, frontend_attributes={m={e = #sdy.mesh<[]>}, k="v"}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  p = (f32[2]{0:D(C)}, f32[2]) parameter(0)
  r = f32[2] all-reduce(f32[2] %p#1), replica_groups=mesh['x'=1,'y'=2, device_ids=(0,1)] {'x'}, to_apply=add
  s = ((f32[2]), (), s32[]) async-start(r), calls=add
  u = ((f32[2], f32[2]), (f32[2]), s32[]) async-update(s, r), calls=add
  ROOT d = (f32[2]) async-done(u), calls=add
}
"""


@FUZZ
@given(st.integers(0, len(_VALID_NEWER) - 1), st.integers(0, 3),
       st.text(alphabet="{}()[],=:%#-0123456789'aDCPefs<>\n ", max_size=4))
def test_fuzz_a_mutated_module_of_the_newer_forms_only_raises_kuiper_errors(position, removed, inserted):
    try:
        parse(_VALID_NEWER[:position] + inserted + _VALID_NEWER[position + removed :])
    except KuiperError:
        pass
