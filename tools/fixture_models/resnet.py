"""ResNet-18 with torchvision's layout, in plain PyTorch (torchvision is not a dependency).

The real model (width 64, 224x224) is 47 MB, too big to check in, so the checked-in
fixture uses base width 8 on 64x64 inputs: same graph, same op types, ~1 MB.
BatchNorm gets random stats so that PNNX's conv+BN folding is actually exercised.
"""

import torch
from torch import nn

from fixturelib import ModelSpec, randomize_batchnorm


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus identity or 1x1-conv/BN downsample, then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)  # one module used twice, as torchvision does
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, width: int = 64, num_classes: int = 1000):
        super().__init__()
        w = width
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(w, w, 1)
        self.layer2 = self._layer(w, 2 * w, 2)
        self.layer3 = self._layer(2 * w, 4 * w, 2)
        self.layer4 = self._layer(4 * w, 8 * w, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8 * w, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    @staticmethod
    def _layer(cin: int, cout: int, stride: int) -> nn.Sequential:
        return nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1))

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(width: int, size: int) -> nn.Module:
    return randomize_batchnorm(ResNet18(width), (8, 3, size, size))


MODELS = {
    "resnet18_w8": ModelSpec(
        build=lambda: resnet18(8, 64), input_shapes=((1, 3, 64, 64),),
        description="ResNet-18 layout at base width 8, random weights and BN stats, 64x64 input"),
    "resnet18_full": ModelSpec(
        build=lambda: resnet18(64, 224), input_shapes=((1, 3, 224, 224),), full=True,
        description="full-size ResNet-18 (width 64, 224x224), random weights and BN stats"),
}
