"""kuiper.onednn.WeightLayouts: a weight kept in each layout a kernel asked for, the given array let go (where
its owner allows) once a kept layout holds its numbers and no plan reads it, and remade from there with the
same bits."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper import onednn
from kuiper.onednn.primitives import Layout
from kuiper.onednn.weight_layouts import WeightLayouts

pytestmark = pytest.mark.skipif(not onednn.available(), reason=onednn.describe())

RNG = np.random.default_rng(5)


def _layouts(shape=(32, 16, 3, 3)):
    library = onednn.library()
    weight = RNG.standard_normal(shape).astype(np.float32)
    return WeightLayouts(library, Layout.plain(library, shape), weight.copy()), weight


def test_the_given_array_is_let_go_once_a_kept_layout_holds_its_numbers():
    layouts, weight = _layouts()
    blocked = Layout.tagged(onednn.library(), weight.shape, "ABcd16b16a")
    layouts.in_layout(blocked, threads=1)
    assert layouts.holds_given  # its owner has not allowed it
    layouts, weight = _layouts()
    layouts.let_go_when_kept = True
    assert layouts.holds_given
    layouts.in_layout(blocked, threads=1)
    assert not layouts.holds_given
    _, remade = layouts.given
    assert remade.shape == weight.shape and remade.dtype == np.float32
    np.testing.assert_array_equal(remade, weight)


def test_a_layout_asked_for_after_letting_go_is_reordered_from_a_kept_one():
    layouts, weight = _layouts()
    layouts.let_go_when_kept = True
    library = onednn.library()
    layouts.in_layout(Layout.tagged(library, weight.shape, "ABcd16b16a"), threads=1)
    assert not layouts.holds_given
    other = Layout.tagged(library, weight.shape, "Acdb16a")
    _, buffer = layouts.in_layout(other, threads=1)
    reference = WeightLayouts(library, layouts.given_layout, weight.copy())
    _, expected = reference.in_layout(other, threads=1)  # from the given array itself
    np.testing.assert_array_equal(buffer, expected)


def test_a_given_array_a_plan_reads_itself_is_never_let_go():
    layouts, weight = _layouts()
    layouts.let_go_when_kept = True
    library = onednn.library()
    layout, array = layouts.in_layout(layouts.given_layout, threads=1)
    assert layout is layouts.given_layout and np.shares_memory(array, layouts.given[1])  # no copy made
    layouts.in_layout(Layout.tagged(library, weight.shape, "ABcd16b16a"), threads=1)
    assert layouts.holds_given
