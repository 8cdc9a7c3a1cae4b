"""Whole model families in plain PyTorch (no torchvision): the graphs real users export.

Each family has a small checked-in fixture (reduced width and resolution, random weights,
random BatchNorm statistics) and a ``full=True`` variant at the published size, exported
only by ``tools/make_fixtures.py --full`` into build/ (never checked in).

* resnet_basic        CIFAR-style ResNet with BasicBlocks (3x3 stem, no maxpool).
* mobilenet_v2        inverted residuals, depthwise convs, ReLU6.
* mobilenet_v3_small  hardswish, hardsigmoid, squeeze-excite.
* yolov5_style        Conv-BN-SiLU, C3, SPPF, nearest upsample, cat, and the Detect head
                      written in plain torch ops (view/permute/sigmoid/split/grid
                      arithmetic with constant grids), as YOLOv5's export path traces it.
* unet                ConvTranspose2d, bilinear upsample (both align_corners), cat,
                      reflect padding, GroupNorm.
* vit_block           patch-embedding conv, LayerNorm, hand-written multi-head attention
                      (matmul/softmax/transpose/reshape), GELU MLP, class token head.

Models whose traced graph reshapes with the batch size (``x.view(bs, ...)``) are exported
with ``dynamic_batch`` so that pnnx keeps the batch dimension symbolic.
"""

import torch
import torch.nn.functional as F
from torch import nn

from fixturelib import randomize_batchnorm, spec
from .resnet import BasicBlock


def make_divisible(value: float, divisor: int = 8) -> int:
    """MobileNet's channel rounding: nearest multiple of divisor, never below 90% of value."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


# ---------------------------------------------------------------- ResNet (BasicBlock)


class ResNetBasic(nn.Module):
    """ResNet with BasicBlocks; ``cifar=True`` uses a 3x3 stem and no maxpool."""

    def __init__(self, blocks, width: int, num_classes: int, cifar: bool):
        super().__init__()
        if cifar:
            self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
            self.maxpool = None
        else:
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        stages = []
        cin = width
        for index, count in enumerate(blocks):
            cout = width * 2 ** index
            stride = 1 if index == 0 else 2
            stages.append(nn.Sequential(*[BasicBlock(cin if i == 0 else cout, cout, stride if i == 0 else 1)
                                          for i in range(count)]))
            cin = cout
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        if self.maxpool is not None:
            x = self.maxpool(x)
        x = self.layers(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet_basic(full: bool) -> nn.Module:
    if full:  # ResNet-34, torchvision layout
        return randomize_batchnorm(ResNetBasic((3, 4, 6, 3), 64, 1000, cifar=False), (8, 3, 224, 224))
    # ResNet-20 style for 32x32 inputs, width 6
    return randomize_batchnorm(ResNetBasic((2, 2, 2), 6, 10, cifar=True), (8, 3, 32, 32))


# ---------------------------------------------------------------- MobileNetV2


class ConvBNAct(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act=nn.ReLU6):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act(inplace=True) if act is not None else None

    def forward(self, x):
        x = self.bn(self.conv(x))
        return x if self.act is None else self.act(x)


class InvertedResidual(nn.Module):
    """1x1 expand (ReLU6) -> 3x3 depthwise (ReLU6) -> 1x1 linear project, residual if shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        self.expand = ConvBNAct(cin, hidden, 1) if expand != 1 else None
        self.depthwise = ConvBNAct(hidden, hidden, 3, stride, groups=hidden)
        self.project = ConvBNAct(hidden, cout, 1, act=None)

    def forward(self, x):
        y = x if self.expand is None else self.expand(x)
        y = self.project(self.depthwise(y))
        return x + y if self.use_residual else y


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))  # expand, channels, repeats, stride

    def __init__(self, width_mult: float, last_channel: int, num_classes: int):
        super().__init__()
        cin = make_divisible(32 * width_mult)
        self.stem = ConvBNAct(3, cin, 3, 2)
        blocks = []
        for expand, channels, repeats, stride in self.SETTINGS:
            cout = make_divisible(channels * width_mult)
            for i in range(repeats):
                blocks.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = ConvBNAct(cin, last_channel, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(last_channel, num_classes)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        x = torch.flatten(self.pool(x), 1)
        return self.classifier(self.dropout(x))


def mobilenet_v2(full: bool) -> nn.Module:
    if full:
        return randomize_batchnorm(MobileNetV2(1.0, 1280, 1000), (8, 3, 224, 224))
    return randomize_batchnorm(MobileNetV2(0.125, 64, 10), (8, 3, 32, 32))


# ---------------------------------------------------------------- MobileNetV3-Small


class SqueezeExcite(nn.Module):
    """Channel attention: global average -> 1x1 conv -> ReLU -> 1x1 conv -> hardsigmoid -> scale."""

    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Hardsigmoid(inplace=True)

    def forward(self, x):
        scale = self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))
        return scale * x


class MobileNetV3Block(nn.Module):
    def __init__(self, cin: int, kernel: int, hidden: int, cout: int, use_se: bool, act, stride: int):
        super().__init__()
        self.use_residual = stride == 1 and cin == cout
        self.expand = ConvBNAct(cin, hidden, 1, act=act) if hidden != cin else None
        self.depthwise = ConvBNAct(hidden, hidden, kernel, stride, groups=hidden, act=act)
        self.se = SqueezeExcite(hidden, make_divisible(hidden // 4)) if use_se else None
        self.project = ConvBNAct(hidden, cout, 1, act=None)

    def forward(self, x):
        y = x if self.expand is None else self.expand(x)
        y = self.depthwise(y)
        if self.se is not None:
            y = self.se(y)
        y = self.project(y)
        return x + y if self.use_residual else y


class MobileNetV3Small(nn.Module):
    # cin, kernel, hidden, cout, squeeze-excite, activation, stride (torchvision's table)
    SETTINGS = ((16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
                (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
                (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
                (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1),
                (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
                (96, 5, 576, 96, True, "HS", 1))

    def __init__(self, width_mult: float, last_channel: int, num_classes: int):
        super().__init__()

        def scaled(c):
            return make_divisible(c * width_mult)

        self.stem = ConvBNAct(3, scaled(16), 3, 2, act=nn.Hardswish)
        blocks = []
        for cin, kernel, hidden, cout, use_se, act, stride in self.SETTINGS:
            act_cls = nn.Hardswish if act == "HS" else nn.ReLU
            blocks.append(MobileNetV3Block(scaled(cin), kernel, scaled(hidden), scaled(cout), use_se, act_cls, stride))
        self.blocks = nn.Sequential(*blocks)
        last_conv = scaled(6 * 96)
        self.head = ConvBNAct(scaled(96), last_conv, 1, act=nn.Hardswish)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Linear(last_conv, last_channel)
        self.fc_act = nn.Hardswish(inplace=True)
        self.dropout = nn.Dropout(0.2)
        self.fc2 = nn.Linear(last_channel, num_classes)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        x = torch.flatten(self.pool(x), 1)
        return self.fc2(self.dropout(self.fc_act(self.fc1(x))))


def mobilenet_v3_small(full: bool) -> nn.Module:
    if full:
        return randomize_batchnorm(MobileNetV3Small(1.0, 1024, 1000), (8, 3, 224, 224))
    return randomize_batchnorm(MobileNetV3Small(0.125, 64, 10), (8, 3, 48, 48))


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


def yolov5_style(full: bool) -> nn.Module:
    if full:  # YOLOv5s: width 32, depth 1 (x3 in the middle stages), 80 classes, 640x640
        return randomize_batchnorm(YOLOv5Style(32, 1, 80, (640, 640)), (4, 3, 640, 640))
    return randomize_batchnorm(YOLOv5Style(2, 1, 4, (32, 64)), (4, 3, 32, 64))


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


def unet(full: bool) -> nn.Module:
    if full:
        return UNet(64, 32, 2)  # the paper's widths (64..512 here), 256x256 input
    return UNet(4, 2, 2)


# ---------------------------------------------------------------- ViT


class Attention(nn.Module):
    """Multi-head self-attention from matmul/softmax/transpose/reshape (timm's layout)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, dim * mlp_ratio)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(dim * mlp_ratio, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, image_size: int, patch: int, dim: int, depth: int, heads: int, num_classes: int):
        super().__init__()
        tokens = (image_size // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads, 4) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        with torch.no_grad():  # default LayerNorm affine is the identity: make it visible
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.normal_(0.0, 0.1)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, tokens, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls, x), 1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def vit_block(full: bool) -> nn.Module:
    if full:  # ViT-B/16
        return ViT(224, 16, 768, 12, 12, 1000)
    return ViT(32, 8, 32, 2, 4, 10)


def _small_and_full(name: str, build, small_shape, full_shape, *, small: str, full: str, **options) -> dict:
    """A family's two specs: ``name`` (the checked-in fixture) and ``name_full`` (exported only by --full)."""
    return {name: spec(lambda: build(False), small_shape, description=small, **options),
            f"{name}_full": spec(lambda: build(True), full_shape, description=full, full=True, **options)}


MODELS = {
    **_small_and_full(
        "resnet_basic", resnet_basic, (1, 3, 32, 32), (1, 3, 224, 224),
        small="CIFAR-style ResNet, BasicBlocks (2,2,2) at width 6, random weights and BN stats, 32x32",
        full="ResNet-34 (BasicBlocks 3,4,6,3, width 64), random weights and BN stats, 224x224"),
    **_small_and_full(
        "mobilenet_v2", mobilenet_v2, (1, 3, 32, 32), (1, 3, 224, 224),
        small="MobileNetV2 at width 0.125, last channel 64, 10 classes, random weights and BN stats, 32x32",
        full="MobileNetV2 1.0, random weights and BN stats, 224x224"),
    **_small_and_full(
        "mobilenet_v3_small", mobilenet_v3_small, (1, 3, 48, 48), (1, 3, 224, 224),
        small="MobileNetV3-Small at width 0.125, 10 classes, random weights and BN stats, 48x48",
        full="MobileNetV3-Small 1.0, random weights and BN stats, 224x224"),
    **_small_and_full(
        "yolov5_style", yolov5_style, (1, 3, 32, 64), (1, 3, 640, 640), dynamic_batch=2,
        small="YOLOv5-style detector at width 2, 4 classes, Detect head as plain ops, 32x64 "
              "(not square, so swapped grid axes show)",
        full="YOLOv5s-sized detector (width 32), 80 classes, Detect head as plain ops, 640x640"),
    **_small_and_full(
        "unet", unet, (1, 3, 32, 32), (1, 3, 256, 256),
        small="UNet at width 4: ConvTranspose2d, bilinear upsample (both align_corners), "
              "reflect padding, GroupNorm, 32x32",
        full="UNet at width 64 (GroupNorm 32), 256x256"),
    **_small_and_full(
        "vit_block", vit_block, (1, 3, 32, 32), (1, 3, 224, 224), dynamic_batch=2,
        small="ViT: 8x8 patches, dim 32, 2 blocks, 4 heads, hand-written attention, 32x32",
        full="ViT-B/16, hand-written attention, 224x224"),
}
