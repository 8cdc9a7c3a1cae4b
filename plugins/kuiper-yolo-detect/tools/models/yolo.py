"""A YOLOv5-compatible ``Detect`` head, importable as ``models.yolo.Detect`` like in YOLOv5.

pnnx names a module kept whole by ``moduleop=`` after its dotted path, so this file must be
importable as ``models.yolo`` (tools/ is put on sys.path by make_fixture.py). Written from
the published YOLOv5 inference equations, not copied:

    p = sigmoid(conv_i(x_i)) viewed as (N, na, ny, nx, no)
    xy = (p[..., 0:2] * 2 + grid - 0.5) * stride_i        (box centre, pixels)
    wh = (p[..., 2:4] * 2) ** 2 * anchor_i * stride_i     (box size, pixels)
    out = cat over levels of (N, na*ny*nx, no), no = nc + 5
"""

import torch
from torch import nn


class Detect(nn.Module):
    """nl detection levels, na anchors per level, a 1x1 conv per level in ``m``.

    Buffers: ``anchors`` (nl, na, 2) in grid units (pixels / stride, as YOLOv5 stores them
    after building) and ``stride`` (nl,). Inference returns only the decoded boxes.
    """

    def __init__(self, nc: int, anchors, ch, strides):
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        stride = torch.tensor(strides, dtype=torch.float32)
        pixels = torch.tensor(anchors, dtype=torch.float32).view(self.nl, self.na, 2)
        self.register_buffer("anchors", pixels / stride.view(-1, 1, 1))
        self.register_buffer("stride", stride)
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def make_grid(self, nx: int, ny: int, i: int):
        ys, xs = torch.meshgrid(torch.arange(ny, dtype=torch.float32), torch.arange(nx, dtype=torch.float32),
                                indexing="ij")
        shape = (1, self.na, ny, nx, 2)
        grid = torch.stack((xs, ys), 2).expand(shape) - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view(1, self.na, 1, 1, 2).expand(shape)
        return grid, anchor_grid

    def forward(self, x):
        z = []
        for i in range(self.nl):
            p = self.m[i](x[i])
            bs, _, ny, nx = p.shape
            p = p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self.make_grid(nx, ny, i)
            xy, wh, conf = p.sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 + grid) * self.stride[i]
            wh = (wh * 2) ** 2 * anchor_grid
            z.append(torch.cat((xy, wh, conf), 4).view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1)
