"""RoiAlign on images whose values are linear in the position, where bilinear samples are exact.

On f(y, x) = 10 y + x a bin's average is f at the mean of its sample points, worked out by hand
below; ONNX's backend suite (tests/onnx/test_backend_suite.py) checks the op against ONNX's reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.errors import KuiperError

from single_op import run_op

RAMP = (10 * np.arange(4)[:, None] + np.arange(4)[None, :]).astype(np.float64)  # f(y, x) = 10 y + x


def roi_align(images, boxes, batch, **params):
    return run_op("RoiAlign", [np.asarray(images), np.asarray(boxes, dtype=np.float64),
                               np.asarray(batch, dtype=np.int64)], params)


def test_aligned_bins_average_to_their_centres():
    # half-pixel: (0.5, 0.5)-(2.5, 2.5) becomes 0..2 per axis; 2x2 bins of 1, samples at .25 and .75
    got = roi_align(RAMP[None, None], [[0.5, 0.5, 2.5, 2.5]], [0], output_size=[2, 2], sampling_ratio=2, aligned=True)
    np.testing.assert_allclose(got, [[[[5.5, 6.5], [15.5, 16.5]]]], rtol=1e-12)


def test_unaligned_regions_scale_and_pick_their_image():
    # spatial_scale .5: 0..6 -> 0..3, one bin, ceil(3) = 3 samples per axis at .5, 1.5, 2.5 (mean 1.5)
    images = np.stack([RAMP, RAMP + 100])[:, None]
    got = roi_align(images, [[0, 0, 6, 6], [0, 0, 6, 6]], [1, 0], output_size=[1, 1], spatial_scale=0.5)
    np.testing.assert_allclose(got.reshape(-1), [116.5, 16.5], rtol=1e-12)


def test_max_mode_takes_the_largest_weighted_corner():
    # all ones: a sample at (.25, .25) weighs its corners .5625, .1875, .1875, .0625; the max is .5625
    got = roi_align(np.ones((1, 1, 4, 4)), [[0, 0, 2, 2]], [0], output_size=[2, 2], sampling_ratio=2,
                    aligned=False, mode="max")
    np.testing.assert_allclose(got, np.full((1, 1, 2, 2), 0.5625))


def test_a_batch_index_out_of_range_is_refused():
    with pytest.raises(KuiperError, match="batch_indices"):
        roi_align(RAMP[None, None], [[0, 0, 1, 1]], [3], output_size=[1, 1])
