"""A model call lets a feed through unchecked only when its class, dtype and shape are those of a feed that
passed the checks unchanged before (kuiper/graph/model.py, _run_steps): every other feed is checked, at any
call, and the size budget is read again whenever it changed."""

import numpy as np
import pytest

import kuiper
from kuiper.errors import InputError, ShapeError, SizeLimitError

from conftest import MODELS

PARAM = MODELS / "resnet18_w8" / "model.pnnx.param"  # input (?, 3, 64, 64) float32


def _warm():
    model = kuiper.load(PARAM, backend="numpy")
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    for _ in range(3):
        model(x)
    return model, x


def test_a_wrong_shape_or_kind_after_good_calls_is_still_refused():
    model, x = _warm()
    with pytest.raises(ShapeError, match="dim 2 must be 64"):
        model(np.zeros((1, 3, 32, 64), np.float32))
    with pytest.raises(InputError, match="expects dtype float32"):
        model(np.zeros((1, 3, 64, 64), np.int32))
    with pytest.raises(InputError, match="must be an array"):
        model("not an array")
    np.testing.assert_array_equal(model(x), model(x.copy()))  # and good feeds still run


def test_a_convertible_feed_is_converted_at_every_call():
    """float64 feeds are converted to the input's float32, never let through as they are."""
    model, x = _warm()
    wide = x.astype(np.float64)
    for _ in range(3):
        np.testing.assert_array_equal(model(wide), model(x))
    assert all(key is None or key[1] != np.float64 for key in model._accepted_feeds)


def test_a_budget_lowered_between_calls_refuses_the_next_call(monkeypatch):
    model, x = _warm()
    monkeypatch.setenv("KUIPER_MEMORY_BUDGET", "4KiB")
    with pytest.raises(SizeLimitError, match="would need about"):  # the feeds' check, before any op runs
        model(x)
    monkeypatch.delenv("KUIPER_MEMORY_BUDGET")
    model(x)
