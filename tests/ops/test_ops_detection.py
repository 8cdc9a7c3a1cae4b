"""The canonical NonMaxSuppression: a hand-worked case, and random boxes against a plain loop over the definition."""

from __future__ import annotations

import numpy as np
import pytest

from single_op import run_op


def iou(a, b):
    """Corner boxes [y1, x1, y2, x2], either diagonal."""
    (ay0, ay1), (ax0, ax1) = sorted(a[0::2]), sorted(a[1::2])
    (by0, by1), (bx0, bx1) = sorted(b[0::2]), sorted(b[1::2])
    h, w = min(ay1, by1) - max(ay0, by0), min(ax1, bx1) - max(ax0, bx0)
    if h <= 0 or w <= 0:
        return 0.0
    inter = h * w
    return inter / ((ay1 - ay0) * (ax1 - ax0) + (by1 - by0) * (bx1 - bx0) - inter)


def reference(boxes, scores, limit, threshold, score_threshold):
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            ranked = sorted((i for i in range(boxes.shape[1]) if scores[b, c, i] > score_threshold),
                            key=lambda i: (-scores[b, c, i], i))
            kept = []
            for i in ranked:
                if len(kept) < limit and all(iou(boxes[b, i], boxes[b, k]) <= threshold for k in kept):
                    kept.append(i)
            rows += [(b, c, k) for k in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


def nms(boxes, scores, limit, threshold, score_threshold=None, center=False):
    inputs = [boxes, scores, np.int64(limit), np.float32(threshold)]
    if score_threshold is not None:
        inputs.append(np.float32(score_threshold))
    return run_op("NonMaxSuppression", inputs, {"center_point_box": center})


def test_a_hand_worked_case():
    # box 1 overlaps box 0 by 0.9/1.1 (suppressed), box 2 is apart, box 3 scores below the threshold
    boxes = np.float32([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 5, 1, 6], [0, 9, 1, 10]]])
    scores = np.float32([[[0.9, 0.95, 0.5, 0.1]]])
    np.testing.assert_array_equal(nms(boxes, scores, 10, 0.5, 0.2), [[0, 0, 1], [0, 0, 2]])
    np.testing.assert_array_equal(nms(boxes, scores, 1, 0.5), [[0, 0, 1]])
    assert nms(boxes, scores, 0, 0.5).shape == (0, 3)
    centers = np.float32([[[0.5, 0.5, 1, 1], [0.6, 0.5, 1, 1], [5.5, 0.5, 1, 1], [9.5, 0.5, 1, 1]]])
    np.testing.assert_array_equal(nms(centers, scores, 10, 0.5, 0.2, center=True), [[0, 0, 1], [0, 0, 2]])


@pytest.mark.parametrize("seed", [0, 1])
def test_random_boxes_match_a_loop_over_the_definition(seed):
    rng = np.random.default_rng(seed)
    corners = rng.uniform(0, 10, (2, 30, 4)).astype(np.float32)
    scores = rng.choice(np.float32([0.1, 0.3, 0.5, 0.7]), (2, 3, 30))  # ties: the lower index goes first
    got = nms(corners, scores, 7, 0.3, 0.2)
    np.testing.assert_array_equal(got, reference(corners, scores, 7, 0.3, 0.2))
