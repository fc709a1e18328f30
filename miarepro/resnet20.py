"""He et al. (2016)'s CIFAR ResNet-20, which torchvision does not provide."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes),
            nn.ReLU(), nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes))
        self.shortcut = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet20(nn.Module):
    """He et al. (2016) CIFAR ResNet with 3 stages of 3 blocks (16/32/64 channels)."""

    def __init__(self, channels: int, n_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(channels, 16, 3, 1, 1, bias=False),
                                   nn.BatchNorm2d(16), nn.ReLU()]
        in_planes = 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for block in range(3):
                layers.append(BasicBlock(in_planes, planes, stride if block == 0 else 1))
                in_planes = planes
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))
