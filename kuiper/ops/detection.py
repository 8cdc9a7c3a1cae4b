"""Object-detection post-processing: NonMaxSuppression.

Inputs ``boxes (B, N, 4)``, ``scores (B, C, N)``, ``max_output (scalar int)``, ``iou_threshold (scalar)``
and, optionally, ``score_threshold (scalar)``. For each batch entry and class, the boxes scoring above
``score_threshold`` are taken from the highest score down (equal scores: the lower box index first); a
box is kept unless its intersection over union with a box kept before it exceeds ``iou_threshold``,
until ``max_output`` are kept. Boxes are corners ``[y1, x1, y2, x2]`` (either diagonal), or with
``center_point_box`` ``[x_center, y_center, width, height]``; a box of no area overlaps nothing.
The output is one row ``[batch, class, box]`` (int64) per kept box, by batch, then class, then the
order they were kept in. (ONNX's NonMaxSuppression; torchvision's nms is one batch entry and class.)
"""

from __future__ import annotations

from ..errors import ShapeError
from .base import Op
from .params import Bool
from .sort import stable_order


class NonMaxSuppression(Op):
    types = ("NonMaxSuppression",)
    fresh_output = True
    params = (Bool("center_point_box", default=False),)

    def setup(self):
        self.require_inputs(4, 5)

    def forward(self, boxes, scores, max_output, iou_threshold, score_threshold=None):
        xp = self.xp
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
                or scores.shape[2] != boxes.shape[1]:
            raise ShapeError(f"{self.node.describe()}: needs boxes (B, N, 4) and scores (B, C, N), found "
                             f"{tuple(boxes.shape)} and {tuple(scores.shape)}")
        for name, value in (("max_output", max_output), ("iou_threshold", iou_threshold),
                            ("score_threshold", score_threshold)):
            if value is not None and value.size != 1:
                raise ShapeError(f"{self.node.describe()}: {name} must hold one value, "
                                 f"found shape {tuple(value.shape)}")
        limit = max(int(self.backend.to_numpy(max_output).reshape(-1)[0]), 0)
        threshold = xp.reshape(xp.astype(iou_threshold, boxes.dtype), ())
        rows = []
        for batch in range(boxes.shape[0]):
            low, high, area = self.extents(boxes[batch, ...])
            for cls in range(scores.shape[1]):
                for box in self.select(scores[batch, cls, ...], low, high, area, threshold, score_threshold, limit):
                    rows.append((batch, cls, box))
        return xp.reshape(xp.asarray(rows, dtype=xp.int64), (len(rows), 3))

    def extents(self, boxes):
        """Each box's lower and upper corner (N, 2) as (y, x), and its area (N,)."""
        xp = self.xp
        if self.center_point_box:
            center, half = boxes[:, 1::-1], boxes[:, 3:1:-1] / 2  # (y, x) and half (height, width)
            low, high = center - half, center + half
        else:
            low, high = xp.minimum(boxes[:, :2], boxes[:, 2:]), xp.maximum(boxes[:, :2], boxes[:, 2:])
        size = high - low
        return low, high, size[:, 0] * size[:, 1]

    def select(self, scores, low, high, area, threshold, score_threshold, limit: int) -> list[int]:
        """The boxes kept for one class, in the order they are kept."""
        xp = self.xp
        if limit == 0:
            return []
        order = stable_order(xp, scores, 0, descending=True)
        if score_threshold is not None:
            above = xp.take(scores, order) > xp.reshape(xp.astype(score_threshold, scores.dtype), ())
            order = order[above]
        candidates = [int(i) for i in self.backend.to_numpy(order)]
        suppressed = xp.zeros(scores.shape, dtype=xp.bool)
        kept = []
        for box in candidates:
            if bool(suppressed[box]):
                continue
            kept.append(box)
            if len(kept) == limit:
                break
            suppressed = suppressed | self.overlaps(box, low, high, area, threshold)
        return kept

    def overlaps(self, box: int, low, high, area, threshold):
        """Where the intersection over union of every box with ``box`` exceeds ``threshold``."""
        xp = self.xp
        extent = xp.minimum(high, high[box, ...]) - xp.maximum(low, low[box, ...])
        meets = (extent[:, 0] > 0) & (extent[:, 1] > 0)
        intersection = extent[:, 0] * extent[:, 1]
        union = area + area[box] - intersection
        valid = meets & (intersection > 0) & (area > 0) & (area[box] > 0) & (union > 0)
        ratio = intersection / xp.where(valid, union, xp.ones_like(union))
        return valid & (ratio > threshold)


OPS = [NonMaxSuppression]
