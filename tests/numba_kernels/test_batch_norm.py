"""nn.BatchNorm in one compiled pass (kuiper/numba_kernels/batch_norm.py), with the clamp that reads it
(ReLU, ReLU6) in the same pass, against float64 references written out here."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kuiper

from conftest import param_text, write_model

pytest.importorskip("numba")

RNG = np.random.default_rng(5)
C = 20
STATS = {"bn.running_mean": RNG.standard_normal(C).astype(np.float32),
         "bn.running_var": (RNG.random(C) + 0.25).astype(np.float32),
         "bn.weight": RNG.standard_normal(C).astype(np.float32),
         "bn.bias": RNG.standard_normal(C).astype(np.float32)}
EPS = 1e-5
BN = (f"nn.BatchNorm{{rank}} bn 1 1 x y affine=True eps={EPS} num_features={C} @running_mean=({C})f32 "
      f"@running_var=({C})f32 @weight=({C})f32 @bias=({C})f32")


def _model(tmp_path, reader: str | None, rank: str = "2d"):
    lines = ["pnnx.Input in0 0 1 x", BN.format(rank=rank)]
    lines += [reader, "pnnx.Output out 1 0 z"] if reader else ["pnnx.Output out 1 0 y"]
    return kuiper.load(write_model(tmp_path, param_text("\n".join(lines)),
                                   {name: value.tobytes() for name, value in STATS.items()}), threads=2)


def _float64_batch_norm(x):
    shape = (C,) + (1,) * (x.ndim - 2)
    mean, var, weight, bias = (np.reshape(STATS[f"bn.{key}"].astype(np.float64), shape)
                               for key in ("running_mean", "running_var", "weight", "bias"))
    return (x.astype(np.float64) - mean) / np.sqrt(var + EPS) * weight + bias


ACTIVATIONS = {  # the reader's line, its float64 math, whether the kernel applies it in the same pass
    "none": (None, lambda v: v, None),
    "ReLU": ("nn.ReLU r 1 1 y z", lambda v: np.maximum(v, 0), True),
    "ReLU6": ("nn.ReLU6 r 1 1 y z", lambda v: np.clip(v, 0, 6), True),
    "SiLU": ("nn.SiLU r 1 1 y z", lambda v: v / (1 + np.exp(-v)), False),
}


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_batch_norm_and_the_activation_after_it_run_as_one_op(tmp_path, activation, kernel_variant):
    reader, math_of, same_pass = ACTIVATIONS[activation]
    model = _model(tmp_path, reader)
    (step,) = model.steps  # the activation became the BatchNorm's epilogue
    assert step.op.compiled
    if same_pass is not None:
        assert ("in the same pass" if same_pass else "after it") in step.op.kernel_note
    x = (3 * RNG.standard_normal((2, C, 9, 7))).astype(np.float32)
    got = model(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, math_of(_float64_batch_norm(x)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("shape", [(300, C), (7, C, 1)])
def test_planes_of_one_value_run_as_rows(tmp_path, activation, shape, kernel_variant):
    # A BatchNorm1d after a Linear (LeViT) normalises (N, C): one row per image, not N * C planes.
    reader, math_of, _ = ACTIVATIONS[activation]
    model = _model(tmp_path, reader, "1d")
    x = (3 * RNG.standard_normal(shape)).astype(np.float32)
    np.testing.assert_allclose(model(x), math_of(_float64_batch_norm(x)), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(("rank", "shape"), [("1d", (3, C)), ("1d", (2, C, 11)), ("3d", (1, C, 3, 4, 5))])
def test_every_rank_normalises_along_axis_1(tmp_path, rank, shape):
    model = _model(tmp_path, "nn.ReLU r 1 1 y z", rank)
    x = RNG.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(model(x), np.maximum(_float64_batch_norm(x), 0), rtol=2e-6, atol=2e-6)


def test_a_nan_stays_nan_through_the_relu_as_in_pytorch(tmp_path, kernel_variant):
    model = _model(tmp_path, "nn.ReLU r 1 1 y z")
    x = RNG.standard_normal((1, C, 4, 4)).astype(np.float32)
    x[0, 3, 1, 2] = np.nan
    got = model(x)
    assert np.isnan(got[0, 3, 1, 2]) and np.isfinite(np.delete(got.ravel(), 3 * 16 + 6)).all()


def test_a_reader_with_inputs_of_its_own_stays_a_separate_op(tmp_path):
    lines = ["pnnx.Input in0 0 1 x", BN.format(rank="2d"), "pnnx.Expression add 2 1 y x z expr=add(@0,@1)",
             "pnnx.Output out 1 0 z"]
    model = kuiper.load(write_model(tmp_path, param_text("\n".join(lines)),
                                    {name: value.tobytes() for name, value in STATS.items()}))
    assert [step.node.name for step in model.steps] == ["bn", "add"]
    x = RNG.standard_normal((2, C, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(model(x), _float64_batch_norm(x) + x, rtol=2e-6, atol=2e-6)


def test_float64_inputs_take_the_reference_and_stay_float64(tmp_path):
    model = _model(tmp_path, "nn.ReLU r 1 1 y z")
    x = RNG.standard_normal((2, C, 3, 3))
    got = model(x)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.maximum(_float64_batch_norm(x), 0), rtol=1e-6, atol=1e-6)


def test_a_wrong_channel_count_names_the_op(tmp_path):
    model = _model(tmp_path, "nn.ReLU r 1 1 y z")
    with pytest.raises(kuiper.ShapeError, match=r"bn.*20 channels"):
        model(np.zeros((1, C + 1, 3, 3), np.float32))
