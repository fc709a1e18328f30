"""Architectures used by the five papers, built from a small config dict.

``build_model({"arch": "mlp", "widths": [1024, 512, 256, 128]}, input_shape, n_classes)``.
CIFAR-style ResNets reuse torchvision's ResNet with a 3×3 stem and no max-pool (the usual
adaptation to 32×32 inputs); ResNet-20 is He et al.'s 6n+2 CIFAR network, not in torchvision.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "leaky_relu": nn.LeakyReLU, "tanh": nn.Tanh}


def mlp(input_shape: tuple[int, ...], n_classes: int, widths: list[int] = (), activation: str =
        "relu", dropout: float = 0.0) -> nn.Module:
    """Fully connected network; ``widths=[]`` gives logistic/softmax regression."""
    layers: list[nn.Module] = [nn.Flatten()]
    previous = math.prod(input_shape)
    for width in widths:
        layers += [nn.Linear(previous, width), ACTIVATIONS[activation]()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        previous = width
    layers.append(nn.Linear(previous, n_classes))
    return nn.Sequential(*layers)


def lenet(input_shape: tuple[int, ...], n_classes: int, variant: str = "classic") -> nn.Module:
    """LeNet. ``classic``: conv6-pool-conv16-pool-FC120-FC84 (Subpop's 84-d latent).
    ``stolen_memories``: conv20-pool-conv50-pool-FC500 with 25%/25%/50% dropout (SM §2.4).
    """
    channels, height, width = input_shape
    if variant == "classic":
        conv, hidden, drops = (6, 16), (120, 84), (0.0, 0.0, 0.0)
    elif variant == "stolen_memories":
        conv, hidden, drops = (20, 50), (500,), (0.25, 0.25, 0.5)
    else:
        raise ValueError(f"unknown lenet variant {variant!r}; "
                         "known: ['classic', 'stolen_memories']")
    layers: list[nn.Module] = []
    previous = channels
    for filters, drop in zip(conv, drops[:2], strict=True):
        layers += [nn.Conv2d(previous, filters, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2)]
        layers += [nn.Dropout(drop)] if drop else []
        previous = filters
    layers.append(nn.Flatten())
    features = previous * (height // 4) * (width // 4)
    for units in hidden:
        layers += [nn.Linear(features, units), nn.ReLU()]
        features = units
    layers += [nn.Dropout(drops[2])] if drops[2] else []
    layers.append(nn.Linear(features, n_classes))
    return nn.Sequential(*layers)


def cnn(input_shape: tuple[int, ...], n_classes: int, filters: list[int] = (32, 64, 128),
        activation: str = "relu") -> nn.Module:
    """Small CNN: a 3×3 conv and 2×2 max-pool per entry of ``filters``, then a linear head."""
    layers: list[nn.Module] = []
    previous = input_shape[0]
    for width in filters:
        layers += [nn.Conv2d(previous, width, 3, padding=1), ACTIVATIONS[activation](),
                   nn.MaxPool2d(2)]
        previous = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(previous, n_classes)]
    return nn.Sequential(*layers)


_TORCHVISION_RESNETS = {10: ("BasicBlock", [1, 1, 1, 1]), 18: ("BasicBlock", [2, 2, 2, 2]),
                        34: ("BasicBlock", [3, 4, 6, 3]), 50: ("Bottleneck", [3, 4, 6, 3])}


def resnet(input_shape: tuple[int, ...], n_classes: int, depth: int = 18) -> nn.Module:
    """CIFAR-style ResNet-10/18/34/50 (torchvision blocks, 3×3 stem) or He et al.'s ResNet-20."""
    if depth == 20:
        return _ResNet20(input_shape[0], n_classes)
    if depth not in _TORCHVISION_RESNETS:
        raise ValueError(f"unsupported resnet depth {depth}; known: [10, 18, 20, 34, 50]")
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models import resnet as tv

    block, layers = _TORCHVISION_RESNETS[depth]
    model = tv.ResNet(getattr(tv, block), layers, num_classes=n_classes)
    model.conv1 = nn.Conv2d(input_shape[0], 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def densenet(input_shape: tuple[int, ...], n_classes: int, depth: int = 121) -> nn.Module:
    """torchvision DenseNet-121/169 with a 3×3 stem and no initial pooling (BMIA's CIFAR-100)."""
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models import densenet as tv

    if depth not in (121, 169):
        raise ValueError(f"unsupported densenet depth {depth}; known: [121, 169]")
    model = getattr(tv, f"densenet{depth}")(num_classes=n_classes)
    model.features.conv0 = nn.Conv2d(input_shape[0], 64, 3, 1, 1, bias=False)
    model.features.pool0 = nn.Identity()
    return model


class _BasicBlock(nn.Module):
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


class _ResNet20(nn.Module):
    """He et al. (2016) CIFAR ResNet with 3 stages of 3 blocks (16/32/64 channels)."""

    def __init__(self, channels: int, n_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(channels, 16, 3, 1, 1, bias=False),
                                   nn.BatchNorm2d(16), nn.ReLU()]
        in_planes = 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for block in range(3):
                layers.append(_BasicBlock(in_planes, planes, stride if block == 0 else 1))
                in_planes = planes
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


ARCHITECTURES = {"mlp": mlp, "lenet": lenet, "cnn": cnn, "resnet": resnet, "densenet": densenet}


def build_model(spec: dict[str, Any], input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """Instantiate ``spec['arch']`` with the remaining keys as its keyword arguments."""
    params = dict(spec)
    arch = params.pop("arch")
    if arch not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {arch!r}; known: {sorted(ARCHITECTURES)}")
    return ARCHITECTURES[arch](tuple(input_shape), n_classes, **params)
