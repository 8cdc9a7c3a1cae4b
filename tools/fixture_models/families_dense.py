"""Dense-prediction families in plain PyTorch (no torchvision): a detector and a segmenter.

As in families_classifiers.py, each has a small checked-in fixture and a ``full=True``
variant at the published size, exported only by ``tools/make_fixtures.py --full``.

* yolov5_style        Conv-BN-SiLU, C3, SPPF, nearest upsample, cat, and the Detect head
                      written in plain torch ops (view/permute/sigmoid/split/grid
                      arithmetic with constant grids), as YOLOv5's export path traces it.
* unet                ConvTranspose2d, bilinear upsample (both align_corners), cat,
                      reflect padding, GroupNorm.
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import small_and_full


# ---------------------------------------------------------------- YOLOv5 style


class ConvBNSiLU(nn.Module):
    """YOLOv5's ``Conv``: conv (no bias) -> BatchNorm -> SiLU, 'same' padding."""

    def __init__(self, cin: int, cout: int, kernel: int = 1, stride: int = 1, padding: int | None = None):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2 if padding is None else padding, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, cin: int, cout: int, shortcut: bool):
        super().__init__()
        self.cv1 = ConvBNSiLU(cin, cout, 1)
        self.cv2 = ConvBNSiLU(cout, cout, 3)
        self.add = shortcut and cin == cout

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    """CSP bottleneck with 3 convs: two branches, one through n Bottlenecks, concatenated."""

    def __init__(self, cin: int, cout: int, n: int = 1, shortcut: bool = True):
        super().__init__()
        hidden = cout // 2
        self.cv1 = ConvBNSiLU(cin, hidden, 1)
        self.cv2 = ConvBNSiLU(cin, hidden, 1)
        self.cv3 = ConvBNSiLU(2 * hidden, cout, 1)
        self.m = nn.Sequential(*[Bottleneck(hidden, hidden, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: three chained 5x5 max pools, concatenated."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        hidden = cin // 2
        self.cv1 = ConvBNSiLU(cin, hidden, 1)
        self.cv2 = ConvBNSiLU(hidden * 4, cout, 1)
        self.pool = nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.pool(x)
        y2 = self.pool(y1)
        return self.cv2(torch.cat((x, y1, y2, self.pool(y2)), 1))


class DetectHead(nn.Module):
    """YOLOv5 ``Detect`` in inference/export mode, as plain tensor ops.

    The grids are built once for the export input size and stored as buffers, so the
    traced graph sees constants (pnnx.Attribute), exactly like an exported YOLOv5.
    """

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))

    def __init__(self, nc: int, channels, strides, image_size: tuple[int, int]):
        super().__init__()
        self.nc, self.no, self.na, self.nl = nc, nc + 5, 3, len(channels)
        self.strides = tuple(strides)
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in channels)
        for i, stride in enumerate(self.strides):
            ny, nx = image_size[0] // stride, image_size[1] // stride
            grid, anchor_grid = self.make_grid(nx, ny, torch.tensor(self.ANCHORS[i], dtype=torch.float32))
            self.register_buffer(f"grid{i}", grid)
            self.register_buffer(f"anchor_grid{i}", anchor_grid)

    def make_grid(self, nx: int, ny: int, anchors: torch.Tensor):
        ys, xs = torch.meshgrid(torch.arange(ny, dtype=torch.float32), torch.arange(nx, dtype=torch.float32),
                                indexing="ij")
        grid = torch.stack((xs, ys), 2).expand(1, self.na, ny, nx, 2) - 0.5  # (1, na, ny, nx, 2)
        anchor_grid = anchors.view(1, self.na, 1, 1, 2).expand(1, self.na, ny, nx, 2)
        return grid.contiguous(), anchor_grid.contiguous()

    def forward(self, features):
        outputs = []
        for i, x in enumerate(features):
            x = self.m[i](x)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            xy, wh, conf = x.sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 + getattr(self, f"grid{i}")) * self.strides[i]
            wh = (wh * 2) ** 2 * getattr(self, f"anchor_grid{i}")
            y = torch.cat((xy, wh, conf), 4)
            outputs.append(y.view(bs, self.na * nx * ny, self.no))
        return torch.cat(outputs, 1)


class YOLOv5Style(nn.Module):
    """YOLOv5 (v6 layout) backbone + PANet head + Detect; ``width`` is the P1 channel count."""

    def __init__(self, width: int, depth: int, nc: int, image_size: tuple[int, int]):
        super().__init__()
        w1, w2, w3, w4, w5 = (width * 2 ** i for i in range(5))
        self.b0 = ConvBNSiLU(3, w1, 6, 2, 2)
        self.b1 = ConvBNSiLU(w1, w2, 3, 2)
        self.b2 = C3(w2, w2, depth)
        self.b3 = ConvBNSiLU(w2, w3, 3, 2)
        self.b4 = C3(w3, w3, 2 * depth)
        self.b5 = ConvBNSiLU(w3, w4, 3, 2)
        self.b6 = C3(w4, w4, 3 * depth)
        self.b7 = ConvBNSiLU(w4, w5, 3, 2)
        self.b8 = C3(w5, w5, depth)
        self.b9 = SPPF(w5, w5)
        self.h10 = ConvBNSiLU(w5, w4, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.h13 = C3(2 * w4, w4, depth, shortcut=False)
        self.h14 = ConvBNSiLU(w4, w3, 1)
        self.h17 = C3(2 * w3, w3, depth, shortcut=False)  # P3/8 out
        self.h18 = ConvBNSiLU(w3, w3, 3, 2)
        self.h20 = C3(2 * w3, w4, depth, shortcut=False)  # P4/16 out
        self.h21 = ConvBNSiLU(w4, w4, 3, 2)
        self.h23 = C3(2 * w4, w5, depth, shortcut=False)  # P5/32 out
        self.detect = DetectHead(nc, (w3, w4, w5), (8, 16, 32), image_size)

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(p5)
        h14 = self.h14(self.h13(torch.cat((self.up(h10), p4), 1)))
        out3 = self.h17(torch.cat((self.up(h14), p3), 1))
        out4 = self.h20(torch.cat((self.h18(out3), h14), 1))
        out5 = self.h23(torch.cat((self.h21(out4), h10), 1))
        return self.detect([out3, out4, out5])


# ---------------------------------------------------------------- UNet


class DoubleConv(nn.Module):
    """(reflect pad -> 3x3 conv -> GroupNorm -> ReLU) twice."""

    def __init__(self, cin: int, cout: int, groups: int):
        super().__init__()
        self.pad1 = nn.ReflectionPad2d(1)
        self.conv1 = nn.Conv2d(cin, cout, 3)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.relu(self.norm1(self.conv1(self.pad1(x))))
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")  # pnnx folds both spellings into the conv
        return self.relu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    """Four-level UNet. Decoder upsampling alternates ConvTranspose2d and bilinear resizes
    (align_corners=True and False), and the output is resized back to the input size."""

    def __init__(self, width: int, groups: int, out_channels: int):
        super().__init__()
        c1, c2, c3, c4 = (width * 2 ** i for i in range(4))
        self.enc1 = DoubleConv(3, c1, groups)
        self.enc2 = DoubleConv(c1, c2, groups)
        self.enc3 = DoubleConv(c2, c3, groups)
        self.bottom = DoubleConv(c3, c4, groups)
        self.pool = nn.MaxPool2d(2)
        self.up3 = nn.ConvTranspose2d(c4, c3, 2, 2)
        self.dec3 = DoubleConv(2 * c3, c3, groups)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.dec2 = DoubleConv(c3 + c2, c2, groups)
        self.up1 = nn.ConvTranspose2d(c2, c1, 3, 2, padding=1, output_padding=1)
        self.dec1 = DoubleConv(2 * c1, c1, groups)
        # even kernel, 'same' size: the asymmetric pad cannot fold into the conv, so it stays an op
        self.out_pad = nn.ReflectionPad2d((0, 1, 0, 1))
        self.out = nn.Conv2d(c1, out_channels, 2)
        self.coarse = nn.Conv2d(c3, out_channels, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        b = self.bottom(self.pool(e3))
        d3 = self.dec3(torch.cat((self.up3(b), e3), 1))
        d2 = self.dec2(torch.cat((self.up2(d3), e2), 1))
        d1 = self.dec1(torch.cat((self.up1(d2), e1), 1))
        # deep supervision: a coarse prediction resized to full size with align_corners=False
        coarse = F.interpolate(self.coarse(d3), scale_factor=4.0, mode="bilinear", align_corners=False)
        return self.out(self.out_pad(d1)) + coarse


MODELS = {
    **small_and_full(
        "yolov5_style",
        lambda: YOLOv5Style(2, 1, 4, (32, 64)), (1, 3, 32, 64),
        # YOLOv5s: width 32, depth 1 (x3 in the middle stages), 80 classes, 640x640
        lambda: YOLOv5Style(32, 1, 80, (640, 640)), (1, 3, 640, 640),
        calibrate_batch=4, dynamic_batch=2,
        small="YOLOv5-style detector at width 2, 4 classes, Detect head as plain ops, 32x64 "
              "(not square, so swapped grid axes show)",
        full="YOLOv5s-sized detector (width 32), 80 classes, Detect head as plain ops, 640x640"),
    **small_and_full(
        "unet",
        lambda: UNet(4, 2, 2), (1, 3, 32, 32),
        lambda: UNet(64, 32, 2), (1, 3, 256, 256),  # the paper's widths (64..512 here)
        small="UNet at width 4: ConvTranspose2d, bilinear upsample (both align_corners), "
              "reflect padding, GroupNorm, 32x32",
        full="UNet at width 64 (GroupNorm 32), 256x256"),
}
