"""Instructions written without a shape: kuiper infers it by XLA's shape rules (kuiper/hlo/infer_shapes.py).

Expected shapes are worked out by hand from the operation semantics; the convolution cases are
XLA's own (xla/tests/conv_depthwise_backprop_filter_test.cc), whose entry layouts state the shape.
"""

from __future__ import annotations

import pytest

from kuiper.errors import HloSyntaxError
from kuiper.hlo import parse


def root_shape(body: str, computations: str = "") -> str:
    module = parse(f"HloModule m\n{computations}ENTRY e {{\n{body}\n}}\n")
    return str(module.entry.root.shape)


def test_dot_gives_batch_then_lhs_free_then_rhs_free_dims():
    body = ("  a = f32[2,10] parameter(0)\n  b = f32[10,2] parameter(1)\n  ROOT d = dot(a, b), lhs_batch_dims={0}, "
            "lhs_contracting_dims={1}, rhs_batch_dims={1}, rhs_contracting_dims={0}")
    assert root_shape(body) == "f32[2]"
    body = ("  a = f32[7,3,5] parameter(0)\n  b = f32[7,5,4,2] parameter(1)\n  ROOT d = dot(a, b), lhs_batch_dims={0}, "
            "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}")
    assert root_shape(body) == "f32[7,3,4,2]"


def test_sparse_dot_ignores_its_metadata_operand():
    body = ("  a = f32[2,16] parameter(0)\n  b = f32[32,2] parameter(1)\n  meta = u16[2,2] parameter(2)\n"
            "  ROOT d = dot(a, b, meta), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, "
            "rhs_contracting_dims={0}, sparsity=L.1@2:4")
    assert root_shape(body) == "f32[2]"


def test_dot_types_the_more_precise_float_and_refuses_mixed_integers():
    body = "  a = bf16[3,4] parameter(0)\n  b = f32[4] parameter(1)\n  ROOT d = dot(a, b), lhs_contracting_dims={1}, " \
           "rhs_contracting_dims={0}"
    assert root_shape(body) == "f32[3]"
    body = body.replace("bf16", "s8").replace("f32[4]", "s32[4]")
    with pytest.raises(HloSyntaxError, match="dot of s8 and s32 needs its shape written out"):
        root_shape(body)


@pytest.mark.parametrize("lhs, rhs, window, labels, groups, expected", [
    # out = (pad_low + (in-1)*lhs_dilate + 1 + pad_high - ((size-1)*rhs_dilate + 1)) // stride + 1
    ("f32[1,3,9,9]", "f32[4,3,3,3]", "size=3x3 stride=2x2 pad=1_0x0_1", "bf01_oi01->bf01", 1, "f32[1,4,4,4]"),
    ("f32[16,3,3,64]", "f32[16,2,3,64]", "size=2x3 pad=1_1x0_0 lhs_dilate=1x3 rhs_dilate=1x2", "f01b_i01o->01fb", 64,
     "f32[4,3,64,1]"),
    ("f32[16,3,1,64]", "f32[16,2,3,64]", "size=2x3 pad=1_1x2_2 lhs_dilate=1x1 rhs_dilate=1x1", "f01b_i01o->01fb", 64,
     "f32[4,3,64,1]"),
    ("f32[8,30,1,64,5]", "f32[8,30,30,64,3]", "size=30x30x3 pad=0_0x29_29x0_0 lhs_dilate=30x1x3 rhs_dilate=29x1x1",
     "f01b2_i01o2->01fb2", 64, "f32[30,30,64,1,11]"),
    ("f32[2,5,3]", "f32[7,3,4]", "size=7", "b0f_0io->b0f", 1, "f32[2,0,4]"),  # the window does not fit: 0
])
def test_convolution_follows_the_window_over_the_dilated_padded_input(lhs, rhs, window, labels, groups, expected):
    body = (f"  p0 = {lhs} parameter(0)\n  p1 = {rhs} parameter(1)\n  ROOT c = convolution(p0, p1), "
            f"window={{{window}}}, dim_labels={labels}, batch_group_count={groups}")
    assert root_shape(body) == expected


def test_conditional_takes_its_first_branch_result_when_that_comes_first():
    branches = ("neg {\n  x = f32[] parameter(0)\n  ROOT n = negate(x)\n}\n"
                "id {\n  y = f32[] parameter(0)\n  ROOT c = copy(y)\n}\n")
    body = ("  a = f32[] parameter(0)\n  p = pred[] parameter(1)\n"
            "  ROOT r = conditional(p, a, a), true_computation=neg, false_computation=id")
    assert root_shape(body, branches) == "f32[]"
    text = f"HloModule m\nENTRY e {{\n{body}\n}}\n{branches}"
    with pytest.raises(HloSyntaxError, match="'conditional' needs its shape written out"):
        parse(text)


def test_clamp_and_select_take_their_value_operand_shape():
    body = "  lo = f32[] parameter(0)\n  x = f32[3] parameter(1)\n  ROOT c = clamp(lo, x, lo)"
    assert root_shape(body) == "f32[3]"


def test_other_opcodes_still_ask_for_the_shape():
    with pytest.raises(HloSyntaxError, match="'reshape' needs its shape written out"):
        root_shape("  x = f32[6] parameter(0)\n  ROOT r = reshape(x)")
