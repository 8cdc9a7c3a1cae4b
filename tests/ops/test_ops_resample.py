"""Resample: each coordinate rule, rounding, filter and option against values worked out by hand.

The positions and weights below follow the formulas in kuiper/ops/resample.py's docstring (ONNX's
Resize spec), computed on paper, not by kuiper; ONNX's backend suite checks the same op through
tests/onnx/test_backend_suite.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.errors import KuiperError

from single_op import run_op


def resample(values, **params):
    """Resample a 1-D float64 row (the only resized axis)."""
    return run_op("Resample", [np.asarray(values, dtype=np.float64)], {"axes": [0], **params})


@pytest.mark.parametrize(("rounding", "want"), [
    # positions x / 2.5 = 0, .4, .8, 1.2, 1.6, 2, 2.4, 2.8, 3.2, 3.6 (clamped to 3)
    ("floor", [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]),
    ("ceil", [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]),
    ("round_prefer_floor", [0, 0, 1, 1, 2, 2, 2, 3, 3, 3]),
])
def test_nearest_rounds_asymmetric_positions(rounding, want):
    got = resample([0, 1, 2, 3], mode="nearest", coordinate_mode="asymmetric", nearest_rounding=rounding,
                   scales=[2.5])
    np.testing.assert_array_equal(got, want)


def test_nearest_halves_go_down_or_up_as_told():
    # asymmetric by 2: positions 0, .5, 1, 1.5, 2, 2.5, 3, 3.5
    floor = resample([0, 1, 2, 3], mode="nearest", coordinate_mode="asymmetric", scales=[2.0])
    ceil = resample([0, 1, 2, 3], mode="nearest", coordinate_mode="asymmetric", scales=[2.0],
                    nearest_rounding="round_prefer_ceil")
    np.testing.assert_array_equal(floor, [0, 0, 1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(ceil, [0, 1, 1, 2, 2, 3, 3, 3])


def test_linear_half_pixel_downsample_reads_between_pairs():
    # 4 -> 2: positions (x + .5) / .5 - .5 = .5, 2.5
    got = resample([0, 10, 20, 30], mode="linear", sizes=[2])
    np.testing.assert_allclose(got, [5, 25], rtol=1e-12)


def test_linear_antialias_widens_the_triangle_and_normalises():
    # stretch .5: taps at distance -1.5 -.5 .5 1.5 weigh .25 .75 .75 .25, / 2; the tap at -1 reads sample 0
    got = resample([0, 10, 20, 30], mode="linear", sizes=[2], antialias=True)
    np.testing.assert_allclose(got, [0.125 * 0 + 0.375 * 0 + 0.375 * 10 + 0.125 * 20,
                                     0.125 * 10 + 0.375 * 20 + 0.375 * 30 + 0.125 * 30], rtol=1e-12)
    # exclude_outside drops the tap at -1 and renormalises the three left
    got = resample([0, 10, 20, 30], mode="linear", sizes=[2], antialias=True, exclude_outside=True)
    np.testing.assert_allclose(got[0], (0.375 * 10 + 0.125 * 20) / 0.875, rtol=1e-12)


def test_cubic_coefficient_shapes_the_kernel():
    # asymmetric by 2, output 3 reads position 1.5: Keys' kernel with a = -.5 weighs -.0625 .5625 .5625 -.0625
    got = resample([1, 2, 4, 8], mode="cubic", coordinate_mode="asymmetric", scales=[2.0], cubic_coeff_a=-0.5)
    assert got[3] == pytest.approx(-0.0625 * 1 + 0.5625 * 2 + 0.5625 * 4 - 0.0625 * 8, rel=1e-12)
    # a = -.75: near(.5) = .59375, far(1.5) = -.09375
    got = resample([1, 2, 4, 8], mode="cubic", coordinate_mode="asymmetric", scales=[2.0])
    assert got[3] == pytest.approx(-0.09375 * 1 + 0.59375 * 2 + 0.59375 * 4 - 0.09375 * 8, rel=1e-12)


def test_align_corners_uses_the_real_resized_length():
    # scale .6 on 4 samples: 2 outputs, positions x * 3 / (2.4 - 1)
    got = resample([0, 1, 2, 3], mode="linear", coordinate_mode="align_corners", scales=[0.6])
    np.testing.assert_allclose(got, [0, 3 / 1.4], rtol=1e-12)


def test_half_pixel_symmetric_keeps_the_centre():
    # scale .6 on 4: L = 2.4, out 2; shift 2 * (1 - 2 / 2.4) = 1/3; positions (x + .5) / .6 - .5 + 1/3
    got = resample([0, 1, 2, 3], mode="linear", coordinate_mode="half_pixel_symmetric", scales=[0.6])
    np.testing.assert_allclose(got, [0.5 / 0.6 - 0.5 + 1 / 3, 1.5 / 0.6 - 0.5 + 1 / 3], rtol=1e-12)


def test_pytorch_half_pixel_reads_the_first_sample_for_one_output():
    np.testing.assert_allclose(resample([4, 5, 6], mode="linear", coordinate_mode="pytorch_half_pixel",
                                        sizes=[1]), [4])
    np.testing.assert_allclose(resample([4, 5, 6], mode="linear", sizes=[1]), [5])  # half_pixel: the centre


def test_crop_and_resize_extrapolates_outside_the_input():
    # crop [.5, 1.5] of 4 samples over 3 outputs: positions 1.5, 3, 4.5 (outside)
    got = resample([0, 10, 20, 30], mode="linear", coordinate_mode="crop_and_resize", sizes=[3],
                   roi=[0.5, 1.5], extrapolation_value=-1.0)
    np.testing.assert_allclose(got, [15, 30, -1])


def test_axes_pick_the_resized_dims_and_others_stay():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = run_op("Resample", [x], {"axes": [1], "mode": "nearest", "coordinate_mode": "asymmetric",
                                   "scales": [2.0]})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.repeat(x, 2, axis=1))
    both = run_op("Resample", [x.astype(np.float32)], {"axes": [1, 0], "mode": "nearest", "sizes": [1, 4],
                                                        "coordinate_mode": "asymmetric"})
    np.testing.assert_array_equal(both, [[0], [0], [3], [3]])


@pytest.mark.parametrize("params", [
    {"axes": [0], "mode": "linear", "scales": [0.0]},
    {"axes": [0], "mode": "linear"},
    {"axes": [0], "mode": "linear", "sizes": [2], "coordinate_mode": "crop_and_resize"},
    {"axes": [0], "mode": "nearest", "sizes": [2], "antialias": True},
    {"axes": [0], "mode": "area", "sizes": [2]},
    {"axes": [0, 0], "mode": "linear", "sizes": [2, 2]},
])
def test_bad_params_are_refused_by_name(params):
    with pytest.raises(KuiperError):
        run_op("Resample", [np.zeros(4, dtype=np.float32)], params)
