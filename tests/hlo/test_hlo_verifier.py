"""Invalid HLO text is rejected, as XLA's parser and verifier reject it, with line and column.

Each case is written here in the spirit of one class of XLA's parser tests; ``_entry`` puts the
given lines in an ENTRY computation starting on line 3, so an instruction on the n-th given line
is on line n + 2, and its error points at its first character (column 3).
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import HloSyntaxError
from kuiper.hlo import parse


def _entry(*lines: str) -> str:
    return "HloModule m\nENTRY e {\n" + "".join(f"  {line}\n" for line in lines) + "}\n"


def _after(computations: str, text: str) -> str:
    """``text`` with ``computations`` placed after its HloModule line."""
    return text.replace("HloModule m\n", "HloModule m\n" + computations, 1)


def _rejected(text: str, message: str) -> HloSyntaxError:
    with pytest.raises(HloSyntaxError, match=message) as info:
        parse(text)
    assert info.value.line > 0 and info.value.column > 0
    assert "^" in str(info.value)
    return info.value


@pytest.mark.parametrize("shape, literal", [
    ("f16[]", "70000"), ("f16[]", "-65520"), ("bf16[]", "1e100"), ("f32[]", "-1e39"), ("f64[]", "1.8e308"),
    ("f64[]", "-1.8e308"), ("c64[]", "(1e100, 0)"), ("c64[]", "(0, -1e100)"), ("u4[]", "16"), ("u4[]", "-1"),
    ("s4[]", "8"), ("s4[]", "-9"), ("u32[]", "4294967296"), ("u32[]", "-1"), ("s8[]", "128"), ("u8[2]", "{1, 256}"),
    ("u64[]", "18446744073709551616"),
])
def test_constants_out_of_range_for_their_type(shape, literal):
    error = _rejected(_entry(f"ROOT c = {shape} constant({literal})"), "out of range for literal's primitive type")
    assert (error.line, error.column) == (3, 3)


@pytest.mark.parametrize("shape, literal, message", [
    ("f32[3]", "{1, 2}", "dimension 0 holds 2 value"),
    ("f32[2,2]", "{1, 2}", "expects nested array in rank 2, but sees 1"),
    ("f32[2]", "{{1}, {2}}", "expects nested array in rank 1, but sees larger"),
    ("(f32[], s32[])", "(1)", "not a tuple of 2"),
    ("s32[]", "1.5", "not an integer"),
])
def test_literals_that_contradict_their_shape(shape, literal, message):
    _rejected(_entry(f"ROOT c = {shape} constant({literal})"), message)


def test_u64_minus_one_is_accepted_as_xla_wraps_it():
    model = kuiper.load(_entry("ROOT c = u64[] constant(-1)"))
    assert model() == np.uint64(2**64 - 1)


_ASYNC_BODY = "async_body {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x)\n}\n"


@pytest.mark.parametrize("lines, message", [
    (["p = f32[2] parameter(0)", "s = (f32[2], f32[2], s32[]) async-start(p), calls=async_body",
      "ROOT d = f32[2] async-done(s)"], "must be \\(\\(async operands\\), async outputs"),
    (["p = f32[2] parameter(0)", "ROOT d = f32[2] async-done(p)"], "must be an async state"),
    (["p = ((f32[2]), f32[2], s32[]) parameter(0)", "ROOT d = f32[2] async-done(p)"],
     "parameter 'p' of the entry computation, not from an async-start"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      "n = ((f32[2]), f32[2], s32[]) negate(s)", "ROOT d = f32[2] async-done(n)"], "comes from negate 'n'"),
    # updates: the state's operands and outputs begin the update's, each new operand is bound
    (["p = f32[2] parameter(0)", "s = ((f32[2]), (), s32[]) async-start(p), calls=async_body",
      "u = ((f32[2], f32[3]), (), s32[]) async-update(s, p)", "ROOT d = () async-done(u)"],
     "operand 1 is f32\\[2\\], its shape binds f32\\[3\\]"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), (), s32[]) async-start(p), calls=async_body",
      "u = ((f32[2], f32[2]), (), s32[]) async-update(s)", "ROOT d = () async-done(u)"],
     "binds 0 new operand\\(s\\), but its shape adds 1"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), (f32[2]), s32[]) async-start(p), calls=async_body",
      "u = ((f32[2]), (f32[3]), s32[]) async-update(s)", "ROOT d = (f32[3]) async-done(u)"],
     "the state's outputs \\(f32\\[2\\]\\) must begin"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      "ROOT d = f32[3] async-done(s)"], "gives f32\\[3\\], its async-start's outputs are f32\\[2\\]"),
    (["p = f32[2] parameter(0)", "s = ((f32[3]), f32[2], s32[]) async-start(p), calls=async_body",
      "ROOT d = f32[2] async-done(s)"], "operand part"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      "u = (f32[2], f32[2], s32[]) async-update(s)", "ROOT d = f32[2] async-done(u)"], "must be \\(\\(async"),
    (["p = f32[2] parameter(0)", 's = ((f32[2]), f32[2], s32[]) custom-call-start(p), custom_call_target="f"',
      "ROOT d = f32[2] add-done(s)"], "not the add-start or -update"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      "ROOT d = f32[2] async-done(s), calls=other_body"], "to be async_body .*but got other_body"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      'ROOT d = f32[2] async-done(s), async_execution_thread="side"'], "to be main .*but got side"),
])
def test_malformed_async_chains(lines, message):
    other = _ASYNC_BODY.replace("async_body", "other_body")
    _rejected(_after(_ASYNC_BODY + other, _entry(*lines)), message)


def test_a_well_formed_async_chain_parses():
    parse(_after(_ASYNC_BODY, _entry("p = f32[2] parameter(0)",
                               "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
                               "u = ((f32[2]), f32[2], s32[]) async-update(s)",
                               "ROOT d = f32[2] async-done(u)")))
    parse(_entry("p = f32[2] parameter(0)", 's = ((f32[2]), f32[3], s32[]) custom-call-start(p), custom_call_target="f"',
                 "ROOT d = f32[3] custom-call-done(s)"))


@pytest.mark.parametrize("lines, message", [
    # XLA's parser reads these (its parse-only tests, ParseAndReturnUnverifiedModule); its verifier refuses
    # them: an update whose operands differ from the start's, a done whose result is not the start's outputs,
    # a done fed a tuple that no start made.
    (["p = f32[2] parameter(0)", "s = ((f32[2]), f32[2], s32[]) async-start(p), calls=async_body",
      "u = ((f32[7]), f32[2], s32[]) async-update(s), calls=async_body", "ROOT d = f32[2] async-done(u)"],
     "the state's operands \\(f32\\[2\\]\\) must begin"),
    (["p = f32[2] parameter(0)", "s = ((f32[2]), (), s32[]) async-start(p), calls=async_body",
      "ROOT d = f32[2] async-done(s)"], "gives f32\\[2\\], its async-start's outputs are \\(\\)"),
    (["p = f32[2] parameter(0)", "q = s32[] parameter(1)", "t = ((f32[2]), f32[2], s32[]) tuple(p, p, q)",
      "ROOT d = f32[2] custom-call-done(t)"], "does not match the tuple element"),
])
def test_async_chains_xla_parses_but_does_not_verify(lines, message):
    text = _after(_ASYNC_BODY, _entry(*lines))
    module = parse(text, verify=False)  # what XLA's parse-only tests ask of its parser
    assert module.entry.root.name == "d"
    with pytest.raises(HloSyntaxError, match=message) as info:  # a user's load verifies, as XLA's compiler does
        kuiper.load_hlo(text)
    assert info.value.line > 3


@pytest.mark.parametrize("header", [
    "input_output_alias={ {0, a}: (0, {0}) }",
    "input_output_alias={ {0}: (zero, {0}) }",
    "input_output_alias={ 0: (0, {0}) }",
    "input_output_alias={ {0}: (0, {0}), (0, {1}) }",
    "input_output_alias={ {0}: (0, {0}, sometimes-alias) }",
    "buffer_donor={ (0, {0, a}) }",
    "buffer_donor={ (zero, {0}) }",
])
def test_aliasing_and_buffer_donor_syntax(header):
    error = _rejected(f"HloModule m, {header}\nENTRY e {{\n  ROOT p = f32[] parameter(0)\n}}", "must be written")
    assert error.line == 1


def test_well_formed_aliasing_parses():
    parse("HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}) }, buffer_donor={ (0, {}) }\n"
          "ENTRY e {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT t = (f32[], f32[]) tuple(a, b)\n}")


@pytest.mark.parametrize("lines, message", [
    (["p = f32[2] parameter(0)", "z = f32[] constant(0)", "ROOT q = f32[4] pad(p, z), padding=wide"],
     "not a pad config"),
    (["p = f32[2] parameter(0)", "z = f32[] constant(0)", "ROOT q = f32[4] pad(p, z), padding=1_1x0_0"],
     "has 2 dimension\\(s\\), the operand f32\\[2\\] has 1"),
    (["p = f32[4] parameter(0)", "k = f32[1] parameter(1)",
      "ROOT c = f32[4] convolution(p, k), window={size=1 pad=1_1_0}, dim_labels=b0f_0io->b0f"],
     "must give low_high per dimension"),
    (["p = f32[] parameter(0)", "ROOT x = f32[] exponential(p), result_accuracy={mode=high}"], "result_accuracy"),
    (["p = f32[] parameter(0)", "ROOT x = f32[] exponential(p), result_accuracy={0.5}"], "result_accuracy"),
    (["p = f32[] parameter(0)", "ROOT x = f32[] exponential(p), result_accuracy={foo=10.0}"], "result_accuracy"),
    (["p = f32[2] parameter(0)", 'ROOT c = f32[2] custom-call(p), custom_call_target="f", api_version=API_V9'],
     "api_version=API_V9 is not one of"),
    (["p = f32[2] parameter(0)", "q = f32[3] parameter(1)",
      'ROOT c = f32[2] custom-call(p, q), custom_call_target="f", operand_layout_constraints={f32[2]{0}}'],
     "expected 2 operand layout constraint"),
    (["p = f32[2] parameter(0)", "q = f32[3] parameter(1)",
      'ROOT c = f32[2] custom-call(p, q), custom_call_target="f", operand_layout_constraints={f32[2]{0}, f32[4]{0}}'],
     "operand 1 \\(f32\\[3\\]\\) is not compatible"),
    # dim_labels name each dim once, with as many spatial dims in input, kernel and output (XLA's InvalidDimLabels).
    *[(["p = f32[1,2,1] parameter(0)", "k = f32[1,1,1] parameter(1)",
        f"ROOT c = f32[1,2,1] convolution(p, k), window={{size=1}}, dim_labels={labels}"], "dim_labels=")
      for labels in ("00_01->10", "012_0123->210", "013_0123->210", "bf0_oi0->bf1", "b0f_0io->b0f0")],
])
def test_attribute_values_that_xla_checks(lines, message):
    _rejected(_entry(*lines), message)


def test_good_attribute_values_parse():
    parse(_entry("p = f32[] parameter(0)", "ROOT x = f32[] exponential(p), result_accuracy={tolerance={atol=0.5,"
                 "rtol=0.1,ulps=2}}"))
    parse(_entry("p = f32[2] parameter(0)", "z = f32[] constant(0)", "ROOT q = f32[5] pad(p, z), padding=1_2"))


_BRANCH = "b {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x)\n}\n"


@pytest.mark.parametrize("text, message", [
    (_after(_BRANCH, _entry("i = s32[2] parameter(0)", "x = f32[2] parameter(1)",
                      "ROOT c = f32[2] conditional(i, x), branch_computations={b}")), "must be a scalar"),
    (_after(_BRANCH, _entry("i = f32[] parameter(0)", "x = f32[2] parameter(1)",
                      "ROOT c = f32[2] conditional(i, x, x), true_computation=b, false_computation=b")),
     "scalar of PRED or S32"),
    (_after(_BRANCH, _entry("i = s32[] parameter(0)", "x = f32[2] parameter(1)",
                      "ROOT c = f32[2] conditional(i, x, x), branch_computations={b}")),
     "1 branch computation\\(s\\) but 2 branch operand"),
    (_entry("s = u64[2] parameter(0)", "t = u64[2] parameter(1)",
            "ROOT r = (u64[2], u32[4]) rng-bit-generator(s, t), algorithm=rng_default"), "takes 1 operand"),
    (_entry("ROOT r = f32[2] dynamic-reshape()"), "takes at least 1 operand"),
    (_entry("p = f32[2] parameter(0)", "ROOT n = f32[2] negate(f32[3] p)"), "written as f32\\[3\\]"),
    (_entry("p = f32[2,3] parameter(0)", "ROOT g = f32[4,3] all-gather(p), dimensions={}"), "dimensions=\\{\\} is empty"),
    (_entry("p = f32[4] parameter(0)", "ROOT g = f32[2] reduce-scatter(p), dimensions={}"), "dimensions=\\{\\} is empty"),
    (_entry("p = f32[2] parameter(0)", "ROOT n = f32[2] negate(p), control-predecessors={ghost}"),
     "control-predecessors names 'ghost'"),
    (_entry("a = f32[2,3] parameter(0)", "b = f32[2,4] parameter(1)",
            "ROOT c = f32[4,3] concatenate(a, b), dimensions={0}"), "outside dimension 0"),
    (_entry("a = f32[2,3] parameter(0)", "b = f32[2,4] parameter(1)",
            "ROOT c = f32[2,8] concatenate(a, b), dimensions={1}"), "adds up to 7"),
    (_entry("p = f32[2] parameter(0)", "ROOT q = f32[2] le(p, p)"), "unknown opcode 'le'"),
    ("HloModule m\nENTRY e () -> f32[3] {\n  ROOT c = f32[2] constant({1, 2})\n}", "not compatible with that of its root"),
])
def test_operand_counts_shapes_and_names(text, message):
    _rejected(text, message)


def test_the_error_points_at_the_offending_instruction():
    error = _rejected(_entry("p = f32[2] parameter(0)", "q = f32[2] negate(p)",
                             "ROOT r = f32[2] negate(q), control-predecessors={nobody}"), "nobody")
    assert (error.line, error.column) == (5, 3)


# -- what XLA's parser refuses in an instruction's shape, opcode or attributes ---------------------
@pytest.mark.parametrize("lines, message", [
    (["t = token[] after-all()", "ROOT r = f32[10] recv(t), channel_id=1"], "recv must have a non-empty tuple"),
    (["t = token[] after-all()", "ROOT r = pred[] infeed(t)"], "infeed must have a non-empty tuple"),
    (["a = f32[4,<=8] parameter(0)", "n = s32[] parameter(1)", "ROOT r = f32[4,<=7] dynamic-reshape(a, n, n)"],
     r"same number of elements in result shape f32\[4,<=7\] \(28\) as in the operand f32\[4,<=8\] \(32\)"),
    (["a = f32[4,<=8] parameter(0)", "n = s32[] parameter(1)", "ROOT r = f32[4,<=8] dynamic-reshape(a, n)"],
     "one dim size operand per result dimension; the result f32\\[4,<=8\\] has 2, found 1"),
    (["p = f32[10] parameter(0)", "ROOT r = f32[10,10] broadcast(p)"], "needs dimensions=\\{...\\}"),
    (["ROOT r = f32[10,10] sqrt(f32[10,10] broadcast(f32[10] parameter(0)))"], "needs dimensions"),  # nested
    (["p = s32[10] parameter(0)", "ROOT r = s8[10,4] bitcast-convert(p), result_accuracy={mode=highest}"],
     "bitcast-convert takes no result_accuracy"),
    (["x = f32[1,2,2,1] parameter(0)", "w = f32[1,1,1,1] parameter(1)",
      "ROOT c = f32[1,2,2,1] convolution(x, w), window={size=1x1 rhs_reversal=1}, dim_labels=b01f_01io->b01f"],
     "rhs_reversal=1 has 1 value\\(s\\), the window size=1x1 2 dimension"),
    (["p = f32[8] parameter(0)", "ROOT g = f32[16] all-gather(p), dimensions={0}, replica_groups=[2,2]<=[16]"],
     "holds 16 devices, which does not match the tile assignment dimensions \\[2, 2\\]"),
    (["p = f32[4,4] parameter(0)", "ROOT c = f32[4,4] copy(p), sharding={devices=[2,2]<=[16]}"],
     "sharding: the iota device list"),
    (["p = f32[4,4] parameter(0)", "ROOT c = f32[4,4] copy(p), sharding={devices=[2,2]0,1,2,3,4}"],
     "sharding lists 5 devices, which does not match the tile assignment size 4"),
    (["p = f32[8] parameter(0)", "s = ((f32[8]), f32[16], u32[]) all-gather-start(p), dimensions={0}",
      "u = ((f32[8]), f32[16], u32[]) all-gather-update(s)", "ROOT d = f32[16] all-gather-done(u)"],
     "unknown opcode 'all-gather-update'"),
    (["p = f32[8] parameter(0)", "s = ((f32[8]), f32[8], u32[]) copy-start(p)", "ROOT d = f32[8] copy-done(s)",
      "u = ((f32[8]), f32[8], u32[]) copy-update(s)"], "unknown opcode 'copy-update'"),
])
def test_shapes_opcodes_and_attributes_xla_refuses(lines, message):
    _rejected(_entry(*lines), message)


@pytest.mark.parametrize("lines", [
    ["p = f32[] parameter(0)", "ROOT r = f32[3] broadcast(p)"],  # a scalar's dimensions may be left out
    ["p = f32[4] parameter(0)", "ROOT r = f32[4] tanh(p), result_accuracy={mode=highest}"],
    ["p = f32[4,4] parameter(0)", "ROOT c = f32[4,4] copy(p), sharding={devices=[2,2]<=[4]T(1,0)}"],
    ["p = f32[4,4] parameter(0)", "ROOT c = f32[4,4] copy(p), sharding={devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"],
    ["a = f32[4,<=8] parameter(0)", "n = s32[] parameter(1)", "ROOT r = f32[<=8,4] dynamic-reshape(a, n, n)"],
])
def test_the_valid_neighbours_of_those_forms_parse(lines):
    parse(_entry(*lines))
