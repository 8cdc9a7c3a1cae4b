"""A third-party kuiper plugin: YOLOv5's ``Detect`` head as one op.

Exported with ``pnnx.export(model, path, (x,), moduleop="models.yolo.Detect")``, the head
stays one op whose inputs are the nl feature maps and whose only data is ``@`` weights::

    models.yolo.Detect detect 3 1 a b c d @anchors=(3,3,2)f32 @m.0.bias=(27)f32
        @m.0.weight=(27,8,1,1)f32 ... @m.2.weight=(27,32,1,1)f32 @stride=(3)f32

There are no params: nl (levels) and na (anchors per level) come from ``@anchors``
(nl, na, 2), which YOLOv5 stores in grid units (pixels / stride), and no = nc + 5 from
the 1x1 conv weights ``@m.<i>.weight`` (na*no, C_i, 1, 1). For each level i:

    p   = sigmoid(m_i(x_i)) viewed as (N, na, ny, nx, no)
    xy  = (p[..., 0:2] * 2 + grid - 0.5) * stride_i
    wh  = (p[..., 2:4] * 2) ** 2 * anchors_i * stride_i
    out = concat over levels of (N, na*ny*nx, no)

The grid depends on the feature-map size, so it is built on first use per (ny, nx)
and cached; everything else is prepared once in ``setup()``.
"""

from __future__ import annotations

import kuiper
from kuiper.errors import ShapeError
from kuiper.ops.base import Op


class YoloDetect(Op):
    types = ("models.yolo.Detect",)

    def setup(self):
        attrs = self.node.attrs
        anchors = attrs.get("anchors")
        if anchors is None:
            raise self.error("missing weight '@anchors' (expected shape (nl, na, 2))")
        if anchors.ndim != 3 or anchors.shape[2] != 2 or anchors.shape[0] < 1 or anchors.shape[1] < 1:
            raise self.error(f"weight '@anchors' must have shape (nl, na, 2), found {tuple(anchors.shape)}")
        self.nl, self.na = int(anchors.shape[0]), int(anchors.shape[1])
        self.require_inputs(self.nl)  # one feature map per level

        stride = attrs.get("stride")
        if stride is None:
            raise self.error(f"missing weight '@stride' (expected shape ({self.nl},))")
        if tuple(stride.shape) != (self.nl,):
            raise self.error(f"weight '@stride' must have shape ({self.nl},) to match @anchors "
                             f"{tuple(anchors.shape)}, found {tuple(stride.shape)}")

        self.no = None
        self.weights, self.biases = [], []
        for i in range(self.nl):
            weight, bias = attrs.get(f"m.{i}.weight"), attrs.get(f"m.{i}.bias")
            if weight is None or bias is None:
                missing = f"m.{i}.weight" if weight is None else f"m.{i}.bias"
                raise self.error(f"missing weight '@{missing}' (level {i} of {self.nl}, from @anchors)")
            if weight.ndim != 4 or weight.shape[2:] != (1, 1) or weight.shape[0] % self.na:
                raise self.error(f"weight '@m.{i}.weight' must be a 1x1 conv weight (na*no, C, 1, 1) with "
                                 f"na={self.na}, found {tuple(weight.shape)}")
            no = weight.shape[0] // self.na
            if self.no is None:
                self.no = no
            if no != self.no or no < 6:
                raise self.error(f"weight '@m.{i}.weight' {tuple(weight.shape)} gives {no} outputs per anchor; "
                                 f"expected the same number >= 6 (nc + 5) on every level")
            if tuple(bias.shape) != (weight.shape[0],):
                raise self.error(f"weight '@m.{i}.bias' must have shape ({weight.shape[0]},), "
                                 f"found {tuple(bias.shape)}")
            # 1x1 conv as a matmul: (na*no, C) @ (N, C, ny*nx)
            self.weights.append(self.backend.asarray(weight.reshape(weight.shape[0], weight.shape[1])))
            self.biases.append(self.xp.reshape(self.backend.asarray(bias), (-1, 1)))

        xp = self.xp
        self.strides = [float(s) for s in stride]
        anchors_px = self.backend.asarray(anchors) * self.xp.reshape(self.backend.asarray(stride), (-1, 1, 1))
        # per level (1, na, 1, 1, 2): broadcasts over batch and grid
        self.anchor_grids = [xp.reshape(anchors_px[i], (1, self.na, 1, 1, 2)) for i in range(self.nl)]
        self.grids = {}

    def grid(self, ny: int, nx: int, dtype):
        """(1, 1, ny, nx, 2) cell offsets (x, y) - 0.5, cached per feature-map size."""
        key = (ny, nx, dtype)
        if key not in self.grids:
            xp = self.xp
            xs = xp.broadcast_to(xp.reshape(xp.arange(nx, dtype=dtype), (1, nx)), (ny, nx))
            ys = xp.broadcast_to(xp.reshape(xp.arange(ny, dtype=dtype), (ny, 1)), (ny, nx))
            self.grids[key] = xp.reshape(xp.stack((xs, ys), axis=-1), (1, 1, ny, nx, 2)) - 0.5
        return self.grids[key]

    def forward(self, *features):
        xp = self.xp
        levels = []
        for i, x in enumerate(features):
            weight = self.weights[i]
            if x.ndim != 4 or x.shape[1] != weight.shape[1]:
                raise ShapeError(f"{self.node.describe()}: input {i} must be (N, {weight.shape[1]}, H, W), "
                                 f"found {tuple(x.shape)}")
            n, c, ny, nx = x.shape
            p = xp.matmul(weight, xp.reshape(x, (n, c, ny * nx))) + self.biases[i]
            p = xp.permute_dims(xp.reshape(p, (n, self.na, self.no, ny, nx)), (0, 1, 3, 4, 2))
            # sigmoid written with tanh: same value, no overflow warning for large |p|
            p = 0.5 * xp.tanh(0.5 * p) + 0.5
            xy = (p[..., 0:2] * 2 + self.grid(ny, nx, p.dtype)) * self.strides[i]
            wh = (p[..., 2:4] * 2) ** 2 * self.anchor_grids[i]
            y = xp.concat((xy, wh, p[..., 4:]), axis=-1)
            levels.append(xp.reshape(y, (n, self.na * ny * nx, self.no)))
        return xp.concat(levels, axis=1)


@kuiper.hookimpl
def kuiper_add_ops():
    return [YoloDetect]
