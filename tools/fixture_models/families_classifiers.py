"""Image classifier families in plain PyTorch (no torchvision): the graphs real users export.

Each family has a small checked-in fixture (reduced width and resolution, random weights,
random BatchNorm statistics) and a ``full=True`` variant at the published size, exported
only by ``tools/make_fixtures.py --full`` into build/ (never checked in).

* resnet_basic        CIFAR-style ResNet with BasicBlocks (3x3 stem, no maxpool).
* mobilenet_v2        inverted residuals, depthwise convs, ReLU6.
* mobilenet_v3_small  hardswish, hardsigmoid, squeeze-excite.
* vit_block           patch-embedding conv, LayerNorm, hand-written multi-head attention
                      (matmul/softmax/transpose/reshape), GELU MLP, class token head.

Models whose traced graph reshapes with the batch size (``x.view(bs, ...)``) are exported
with ``dynamic_batch`` so that pnnx keeps the batch dimension symbolic.  The detector and
the segmenter are in families_dense.py.
"""

import torch
from torch import nn

from fixturelib import small_and_full
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


MODELS = {
    **small_and_full(
        "resnet_basic",
        lambda: ResNetBasic((2, 2, 2), 6, 10, cifar=True), (1, 3, 32, 32),  # ResNet-20 style for 32x32 inputs
        lambda: ResNetBasic((3, 4, 6, 3), 64, 1000, cifar=False), (1, 3, 224, 224),  # ResNet-34, torchvision layout
        calibrate_batch=8,
        small="CIFAR-style ResNet, BasicBlocks (2,2,2) at width 6, random weights and BN stats, 32x32",
        full="ResNet-34 (BasicBlocks 3,4,6,3, width 64), random weights and BN stats, 224x224"),
    **small_and_full(
        "mobilenet_v2",
        lambda: MobileNetV2(0.125, 64, 10), (1, 3, 32, 32),
        lambda: MobileNetV2(1.0, 1280, 1000), (1, 3, 224, 224),
        calibrate_batch=8,
        small="MobileNetV2 at width 0.125, last channel 64, 10 classes, random weights and BN stats, 32x32",
        full="MobileNetV2 1.0, random weights and BN stats, 224x224"),
    **small_and_full(
        "mobilenet_v3_small",
        lambda: MobileNetV3Small(0.125, 64, 10), (1, 3, 48, 48),
        lambda: MobileNetV3Small(1.0, 1024, 1000), (1, 3, 224, 224),
        calibrate_batch=8,
        small="MobileNetV3-Small at width 0.125, 10 classes, random weights and BN stats, 48x48",
        full="MobileNetV3-Small 1.0, random weights and BN stats, 224x224"),
    **small_and_full(
        "vit_block",
        lambda: ViT(32, 8, 32, 2, 4, 10), (1, 3, 32, 32),
        lambda: ViT(224, 16, 768, 12, 12, 1000), (1, 3, 224, 224),  # ViT-B/16
        dynamic_batch=2,
        small="ViT: 8x8 patches, dim 32, 2 blocks, 4 heads, hand-written attention, 32x32",
        full="ViT-B/16, hand-written attention, 224x224"),
}
