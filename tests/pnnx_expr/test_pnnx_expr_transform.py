"""Rewrites the fusion pass uses: substitute, renumber, canonical input order, hoisting sizes."""

from __future__ import annotations

import pytest

from kuiper.pnnx_expr import (
    Input,
    Size,
    canonicalize_inputs,
    depth,
    first_appearance_order,
    hoist_sizes,
    input_indices,
    parse,
    renumber,
    shift_inputs,
    substitute,
    to_string,
    uses_size_of,
)


def test_substitute_composes_a_producer_into_its_consumer():
    consumer = parse("add(@0,@1)")
    producer = parse("relu(@2)")
    assert to_string(substitute(consumer, {1: producer})) == "add(@0,relu(@2))"


def test_substitute_replaces_every_occurrence_and_leaves_others():
    fused = substitute(parse("mul(@0,add(@0,@1))"), {0: parse("sigmoid(@3)")})
    assert to_string(fused) == "mul(sigmoid(@3),add(sigmoid(@3),@1))"


def test_substitute_keeps_size_of_a_renamed_input():
    assert to_string(substitute(parse("mul(@0,size(@0,1))"), {0: Input(4)})) == "mul(@4,size(@4,1))"


def test_substitute_refuses_a_computed_value_whose_size_is_asked():
    expr = parse("mul(@0,size(@0,1))")
    assert uses_size_of(expr, 0) and not uses_size_of(expr, 1)
    with pytest.raises(ValueError, match="size"):
        substitute(expr, {0: parse("neg(@1)")})


def test_substitute_refuses_lists_and_shapes():
    with pytest.raises(ValueError):
        substitute(parse("neg(@0)"), {0: parse("[1,2]")})
    with pytest.raises(ValueError):
        substitute(parse("neg(@0)"), {0: parse("size(@1)")})


def test_renumber_and_shift():
    assert to_string(renumber(parse("sub(@1,@0)"), {0: 1, 1: 0})) == "sub(@0,@1)"
    assert to_string(shift_inputs(parse("sub(@1,size(@0,0))"), 3)) == "sub(@4,size(@3,0))"
    with pytest.raises(ValueError, match="no new number"):
        renumber(parse("add(@0,@1)"), {0: 0})


def test_canonical_order_is_first_appearance_like_pnnx():
    expr, order = canonicalize_inputs(parse("add(mul(@3,@1),@3)"))
    assert to_string(expr) == "add(mul(@0,@1),@0)"
    assert order == (3, 1)
    assert first_appearance_order(parse("add(@2,add(@0,@2))")) == (2, 0)
    assert input_indices(parse("add(@2,add(@0,@2))")) == (0, 2)


def test_hoist_sizes_makes_scalar_inputs():
    expr, hoisted = hoist_sizes(parse("div(@0,mul(size(@0,1),size(@1,0)))"), num_inputs=2)
    assert to_string(expr) == "div(@0,mul(@2,@3))"
    assert hoisted == ((0, 1), (1, 0))
    same, again = hoist_sizes(parse("add(size(@0,0),size(@0,0))"), num_inputs=1)
    assert to_string(same) == "add(@1,@1)" and again == ((0, 0),)
    with pytest.raises(ValueError):
        hoist_sizes(Size(Input(0), None), 1)


def test_depth():
    assert depth(parse("@0")) == 1
    assert depth(parse("add(neg(@0),1)")) == 3


def test_deep_fused_chains_still_print():
    # Fusion can compose expressions past the parser's depth limit; rewrites and printing cope.
    expr = parse("@0")
    for _ in range(40):
        expr = substitute(parse("neg(neg(neg(neg(neg(neg(neg(neg(neg(neg(@0))))))))))"), {0: expr})
    assert depth(expr) == 401
    assert to_string(expr).count("neg(") == 400


def test_shared_subtrees_are_handled_in_linear_time():
    # Each step uses its input twice: as a tree this has 2**200 leaves, as a DAG 1000 nodes.
    expr = parse("@0")
    for _ in range(200):
        expr = substitute(parse("add(gelu(@0),mul(@0,0.5))"), {0: expr})
    assert hash(expr) == hash(substitute(expr, {}))
    assert depth(expr) == 401
    assert input_indices(expr) == (0,) and uses_size_of(expr, 0) is False
    assert input_indices(renumber(expr, {0: 3})) == (3,)
