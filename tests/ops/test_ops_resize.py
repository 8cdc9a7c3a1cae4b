"""Interpolation and shuffle ops: hand-computed source indices and weights.

The expected values below are worked out from PyTorch's documented formulas
(ATen UpSample.h), not taken from kuiper; the exported fixtures resize_* check
the same ops against PyTorch itself.
"""

from __future__ import annotations

import numpy as np
import pytest

import kuiper
from kuiper.errors import KuiperError, ShapeError, UnsupportedOperatorError

from test_ops_shape import load_graph, single_op


def row(values):
    """A (1, 1, 1, W) image holding ``values`` (so only W is resized)."""
    return np.asarray(values, dtype=np.float32).reshape(1, 1, 1, -1)


def resize_row(tmp_path, backend_name, values, params, op_type="F.upsample"):
    return single_op(tmp_path, backend_name, op_type, params, row(values)).reshape(-1)


def test_nearest_by_scale_two_repeats_each_pixel(tmp_path, backend_name):
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    got = single_op(tmp_path, backend_name, "F.upsample_nearest", "scale_factor=(2.0,2.0)", x)
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))


def test_nearest_uses_one_over_scale_factor_not_the_size_ratio(tmp_path, backend_name):
    values = [0, 1, 2, 3, 4]
    # scale_factor 1.7: out = floor(5 * 1.7) = 8, src = floor(dst / 1.7)
    got = resize_row(tmp_path, backend_name, values, "scale_factor=(1.0,1.7)", "F.upsample_nearest")
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 2, 2, 3, 4])
    # size 8: src = floor(dst * 5 / 8)
    got = resize_row(tmp_path, backend_name, values, "size=(1,8)", "F.upsample_nearest")
    np.testing.assert_array_equal(got, [0, 0, 1, 1, 2, 3, 3, 4])


def test_nearest_downscale_by_size(tmp_path, backend_name):
    got = resize_row(tmp_path, backend_name, [0, 1, 2, 3, 4, 5, 6], "mode=nearest size=(1,3)")
    np.testing.assert_array_equal(got, [0, 2, 4])  # floor(dst * 7/3) = 0, 2, 4


def test_nearest_exact_rounds_to_the_nearest_centre(tmp_path, backend_name):
    # src = floor((dst + 0.5) * 5 / 3) = floor(0.83), floor(2.5), floor(4.17)
    got = resize_row(tmp_path, backend_name, [0, 1, 2, 3, 4], "mode=nearest-exact size=(1,3)", "F.interpolate")
    np.testing.assert_array_equal(got, [0, 2, 4])


def test_nearest_1d_and_2d_differ_when_the_size_is_unchanged(tmp_path, backend_name):
    # ATen's 2-D nearest copies an axis whose size does not change; 1-D nearest applies
    # floor(dst / 1.2) even then (scale 1.2 on 3 samples keeps 3 samples).
    x1 = np.arange(3, dtype=np.float32).reshape(1, 1, 3)
    got = single_op(tmp_path, backend_name, "F.upsample", "mode=nearest scale_factor=(1.2)", x1)
    np.testing.assert_array_equal(got.reshape(-1), [0, 0, 1])
    got = resize_row(tmp_path, backend_name, [0, 1, 2], "mode=nearest scale_factor=(1.0,1.2)")
    np.testing.assert_array_equal(got, [0, 1, 2])


def test_bilinear_align_corners_true_hits_both_ends(tmp_path, backend_name):
    got = resize_row(tmp_path, backend_name, [0, 1, 2], "align_corners=True mode=bilinear size=(1,5)")
    np.testing.assert_allclose(got, [0, 0.5, 1, 1.5, 2], atol=1e-6)


def test_bilinear_half_pixel_by_size_clamps_at_the_borders(tmp_path, backend_name):
    # src = (dst + 0.5) * 3/6 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25, 1.75, 2.25 (last sample)
    got = resize_row(tmp_path, backend_name, [0, 1, 2], "align_corners=False mode=bilinear size=(1,6)")
    np.testing.assert_allclose(got, [0, 0.25, 0.75, 1.25, 1.75, 2], atol=1e-6)


def test_bilinear_scale_factor_is_used_unless_recomputed(tmp_path, backend_name):
    values = [0, 1, 2]
    # out = floor(3 * 1.5) = 4; with the given factor src = (dst + 0.5) / 1.5 - 0.5
    got = resize_row(tmp_path, backend_name, values, "align_corners=False mode=bilinear scale_factor=(1.0,1.5)")
    np.testing.assert_allclose(got, [0, 0.5, 7 / 6, 11 / 6], atol=1e-6)
    # recompute_scale_factor=True: src = (dst + 0.5) * 3/4 - 0.5
    got = resize_row(tmp_path, backend_name, values,
                     "align_corners=False mode=bilinear recompute_scale_factor=True scale_factor=(1.0,1.5)",
                     "F.interpolate")
    np.testing.assert_allclose(got, [0, 0.625, 1.375, 2], atol=1e-6)


def test_linear_copies_an_axis_whose_size_does_not_change(tmp_path, backend_name):
    # scale 1.2 on 3 samples: out = 3, and ATen copies instead of resampling at 1/1.2
    got = resize_row(tmp_path, backend_name, [5, -1, 2], "align_corners=False mode=bilinear scale_factor=(1.0,1.2)")
    np.testing.assert_array_equal(got, [5, -1, 2])


def test_linear_and_trilinear_on_3d_and_5d_inputs(tmp_path, backend_name):
    x = np.array([0, 2, 4], dtype=np.float32).reshape(1, 1, 3)
    got = single_op(tmp_path, backend_name, "F.upsample", "align_corners=True mode=linear size=(5)", x)
    np.testing.assert_allclose(got.reshape(-1), [0, 1, 2, 3, 4], atol=1e-6)
    # a 5-D input that varies along D only: trilinear reduces to linear along D
    volume = np.broadcast_to(np.array([0, 2, 4], np.float32).reshape(1, 1, 3, 1, 1), (1, 2, 3, 2, 2)).copy()
    got = single_op(tmp_path, backend_name, "F.upsample", "align_corners=True mode=trilinear size=(5,3,1)", volume)
    assert got.shape == (1, 2, 5, 3, 1)
    np.testing.assert_allclose(got[0, 1, :, 2, 0], [0, 1, 2, 3, 4], atol=1e-6)


def test_bicubic_weights_at_half_a_pixel(tmp_path, backend_name):
    # align_corners: src = dst * (3-1)/(5-1); dst 1 -> src 0.5, t = 0.5, taps at -1 (clamped to 0), 0, 1, 2
    # Keys' kernel, A = -0.75: w(1.5) = -0.09375, w(0.5) = 0.59375
    values = [0.0, 1.0, 4.0]
    got = resize_row(tmp_path, backend_name, values, "align_corners=True mode=bicubic size=(1,5)")
    want1 = -0.09375 * 0 + 0.59375 * 0 + 0.59375 * 1 - 0.09375 * 4
    assert got[0] == pytest.approx(0.0, abs=1e-6)
    assert got[1] == pytest.approx(want1, abs=1e-6)
    assert got[4] == pytest.approx(4.0, abs=1e-6)


def test_bicubic_keeps_a_constant_image_constant(tmp_path, backend_name):
    x = np.full((1, 2, 4, 5), 3.25, dtype=np.float32)
    got = single_op(tmp_path, backend_name, "F.upsample", "align_corners=False mode=bicubic scale_factor=(1.7,0.6)", x)
    assert got.shape == (1, 2, 6, 3)
    np.testing.assert_allclose(got, 3.25, atol=1e-5)


def test_upsample_bilinear_forms_always_align_corners(tmp_path, backend_name):
    for op_type, params in [("nn.UpsamplingBilinear2d", "size=(1,5)"), ("F.upsample_bilinear", "size=(1,5)")]:
        got = resize_row(tmp_path, backend_name, [0, 1, 2], params, op_type)
        np.testing.assert_allclose(got, [0, 0.5, 1, 1.5, 2], atol=1e-6)


def test_nn_upsample_reads_size_none_and_scale_factor(tmp_path, backend_name):
    got = resize_row(tmp_path, backend_name, [0, 1], "mode=nearest scale_factor=(1.0,3.0) size=None", "nn.Upsample")
    np.testing.assert_array_equal(got, [0, 0, 0, 1, 1, 1])


def test_output_size_from_an_expression(tmp_path, backend_name):
    x = np.arange(6, dtype=np.float32).reshape(2, 1, 1, 3)
    body = """
pnnx.Input in0 0 1 x
pnnx.Expression size 1 1 x s expr=[1,add(size(@0,0),4)]
F.upsample op 2 1 x s y align_corners=True mode=bilinear $input=x $size=s
pnnx.Output out 1 0 y
"""
    got = kuiper.to_numpy(load_graph(tmp_path, body, backend_name)(x))
    # batch 2 -> size [1, 6]; align_corners: src = dst * 2/5
    assert got.shape == (2, 1, 1, 6)
    np.testing.assert_allclose(got[1].reshape(-1), [3, 3.4, 3.8, 4.2, 4.6, 5], atol=1e-6)


@pytest.mark.parametrize("params", ["mode=area size=(2,2)", "mode=bicubic antialias=True size=(2,2)",
                                    "mode=bilinear align_corners=False antialias=True size=(2,2)"])
def test_unsupported_interpolation_fails_at_load(tmp_path, params):
    with pytest.raises(UnsupportedOperatorError):
        single_op(tmp_path, "numpy", "F.interpolate", params, np.zeros((1, 1, 4, 4), np.float32))


def test_interpolation_mode_must_match_the_rank(tmp_path):
    with pytest.raises(ShapeError, match="bilinear"):
        single_op(tmp_path, "numpy", "F.upsample", "mode=bilinear size=(4)", np.zeros((1, 1, 4), np.float32))


def test_size_and_scale_factor_together_are_rejected(tmp_path):
    with pytest.raises(KuiperError, match="exactly one"):
        single_op(tmp_path, "numpy", "F.upsample", "mode=nearest size=(2,2) scale_factor=(2.0,2.0)",
                  np.zeros((1, 1, 4, 4), np.float32))


def test_pixel_shuffle_and_unshuffle(tmp_path, backend_name):
    x = np.arange(8, dtype=np.float32).reshape(1, 8, 1, 1)
    got = single_op(tmp_path, backend_name, "F.pixel_shuffle", "upscale_factor=2", x)
    # output channel c takes input channels 4c..4c+3 as its 2x2 block, row-major
    np.testing.assert_array_equal(got, [[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]])
    y = np.random.default_rng(0).standard_normal((2, 3, 4, 6)).astype(np.float32)
    down = single_op(tmp_path, backend_name, "nn.PixelUnshuffle", "downscale_factor=2", y)
    assert down.shape == (2, 12, 2, 3)
    np.testing.assert_array_equal(down[0, 4 * 1 + 2 * 1 + 0], y[0, 1, 1::2, 0::2])
    np.testing.assert_array_equal(single_op(tmp_path, backend_name, "nn.PixelShuffle", "upscale_factor=2", down), y)


def test_channel_shuffle(tmp_path, backend_name):
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
    got = single_op(tmp_path, backend_name, "nn.ChannelShuffle", "groups=2", x)
    np.testing.assert_array_equal(got.reshape(-1), [0, 3, 1, 4, 2, 5])
    with pytest.raises(ShapeError, match="groups"):
        single_op(tmp_path, "numpy", "F.channel_shuffle", "groups=4", x)
