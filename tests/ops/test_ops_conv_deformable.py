"""DeformConv2d against a direct float64 convolution written out in loops here, with offsets that move
each tap by whole pixels (a shifted image) and by half a pixel (the mean of two neighbours)."""

from __future__ import annotations

import numpy as np
import pytest

from kuiper.errors import KuiperError

from single_op import run_op


def direct_conv(x, weight, bias, stride, pad, shift=(0.0, 0.0), groups=1):
    """sum over taps of weight * x read at (tap place + shift), bilinear, zero outside; in loops."""
    n, c, h, w = x.shape
    out_c, group_c, kh, kw = weight.shape
    out_h = (h + 2 * pad - kh) // stride + 1
    out_w = (w + 2 * pad - kw) // stride + 1

    def read(image, y, x_):
        total = 0.0
        for yy in (np.floor(y), np.floor(y) + 1):
            for xx in (np.floor(x_), np.floor(x_) + 1):
                weight_ = max(0.0, 1 - abs(y - yy)) * max(0.0, 1 - abs(x_ - xx))
                if weight_ and 0 <= yy < h and 0 <= xx < w:
                    total += weight_ * image[int(yy), int(xx)]
        return total

    out = np.zeros((n, out_c, out_h, out_w))
    for b in range(n):
        for o in range(out_c):
            g = o // (out_c // groups)
            for i in range(out_h):
                for j in range(out_w):
                    total = bias[o]
                    for ci in range(group_c):
                        for p in range(kh):
                            for q in range(kw):
                                total += weight[o, ci, p, q] * read(x[b, g * group_c + ci], i * stride - pad + p + shift[0],
                                                                    j * stride - pad + q + shift[1])
                    out[b, o, i, j] = total
    return out


def deform(x, weight, bias, offset, stride, pad, groups=1):
    params = {"stride": [stride] * 2, "pads": [[pad, pad]] * 2, "groups": groups, "bias": True}
    return run_op("DeformConv2d", [x, offset, weight, bias], params)


@pytest.mark.parametrize(("shift", "groups"), [((0.0, 0.0), 1), ((1.0, -1.0), 1), ((0.5, 0.25), 2)])
def test_offsets_move_every_tap(shift, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 6))
    weight = rng.standard_normal((6, 4 // groups, 3, 3))
    bias = rng.standard_normal(6)
    out_h, out_w = (5 + 2 - 3) // 2 + 1, (6 + 2 - 3) // 2 + 1
    offset = np.empty((2, 9, 2, out_h, out_w))
    offset[:, :, 0], offset[:, :, 1] = shift
    got = deform(x, weight, bias, offset.reshape(2, 18, out_h, out_w), stride=2, pad=1, groups=groups)
    np.testing.assert_allclose(got, direct_conv(x, weight, bias, 2, 1, shift, groups), rtol=1e-10, atol=1e-12)


def test_a_mask_scales_each_sample():
    x = np.arange(9, dtype=np.float64).reshape(1, 1, 3, 3)
    weight = np.ones((1, 1, 1, 1))
    offset = np.zeros((1, 2, 3, 3))
    mask = np.full((1, 1, 3, 3), 0.5)
    got = run_op("DeformConv2d", [x, offset, weight, mask], {"mask": True})
    np.testing.assert_allclose(got, x * 0.5)


def test_an_offset_of_the_wrong_shape_is_refused():
    with pytest.raises(KuiperError, match="offset"):
        run_op("DeformConv2d", [np.zeros((1, 1, 3, 3)), np.zeros((1, 2, 2, 2)), np.zeros((1, 1, 1, 1))], {})
