"""Architectures used by the five papers, built from a small config dict.

``build_model({"arch": "mlp", "widths": [1024, 512, 256, 128]}, input_shape, n_classes)``.
CIFAR-style ResNets reuse torchvision's ResNet with a 3×3 stem and no max-pool (the usual
adaptation to 32×32 inputs); ResNet-20 is He et al.'s 6n+2 CIFAR network, not in torchvision.

torch is imported inside the builders, so that the config check at start-up can read their
options (:func:`check_architecture`) without paying for it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from miarepro.options import Range, check_options, unknown

if TYPE_CHECKING:
    from torch import nn

Activation = Literal["relu", "leaky_relu", "tanh"]
_ACTIVATIONS = {"relu": "ReLU", "leaky_relu": "LeakyReLU", "tanh": "Tanh"}
Width = Annotated[int, Range(1)]


def _activation(name: str) -> nn.Module:
    from torch import nn

    return getattr(nn, _ACTIVATIONS[name])()


def mlp(input_shape: tuple[int, ...], n_classes: int, widths: list[Width] = (),
        activation: Activation = "relu",
        dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0) -> nn.Module:
    """Fully connected network; ``widths=[]`` gives logistic/softmax regression."""
    from torch import nn

    layers: list[nn.Module] = [nn.Flatten()]
    previous = math.prod(input_shape)
    for width in widths:
        layers += [nn.Linear(previous, width), _activation(activation)]
        if dropout:
            layers.append(nn.Dropout(dropout))
        previous = width
    layers.append(nn.Linear(previous, n_classes))
    return nn.Sequential(*layers)


def logistic(input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """Binary logistic regression with one logit, ``s = w.x + b`` (IHA's MNIST-Odd model: 785
    parameters on 28 x 28 digits). The output is ``[0, s]``: its softmax is
    ``[1 - sigmoid(s), sigmoid(s)]``, so every signal, loss and attack on class logits applies
    unchanged, and the ``mse`` loss is the paper's ``(sigmoid(s) - y)^2``. A 2-class softmax
    instead has 1,570 parameters, of which half are redundant, and its Hessian is another."""
    import torch
    from torch import nn

    if n_classes != 2:
        raise ValueError(f"logistic regression has one logit: it needs 2 classes, got {n_classes}")

    class OneLogit(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(math.prod(input_shape), 1)

        def forward(self, x):
            s = self.linear(x.flatten(1))
            return torch.cat([torch.zeros_like(s), s], dim=1)

    return OneLogit()


def lenet(input_shape: tuple[int, ...], n_classes: int,
          variant: Literal["classic", "stolen_memories"] = "classic") -> nn.Module:
    """LeNet. ``classic``: conv6-pool-conv16-pool-FC120-FC84 (Subpop's 84-d latent).
    ``stolen_memories``: conv20-pool-conv50-pool-FC500 with 25%/25%/50% dropout (SM §2.4).
    """
    from torch import nn

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


def cnn(input_shape: tuple[int, ...], n_classes: int, filters: list[Width] = (32, 64, 128),
        activation: Activation = "relu") -> nn.Module:
    """Small CNN: a 3×3 conv and 2×2 max-pool per entry of ``filters``, then a linear head."""
    from torch import nn

    layers: list[nn.Module] = []
    previous = input_shape[0]
    for width in filters:
        layers += [nn.Conv2d(previous, width, 3, padding=1), _activation(activation),
                   nn.MaxPool2d(2)]
        previous = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(previous, n_classes)]
    return nn.Sequential(*layers)


_TORCHVISION_RESNETS = {10: ("BasicBlock", [1, 1, 1, 1]), 18: ("BasicBlock", [2, 2, 2, 2]),
                        34: ("BasicBlock", [3, 4, 6, 3]), 50: ("Bottleneck", [3, 4, 6, 3])}


def resnet(input_shape: tuple[int, ...], n_classes: int,
           depth: Literal[10, 18, 20, 34, 50] = 18, wide: bool = False) -> nn.Module:
    """CIFAR-style ResNet-10/18/34/50 (torchvision blocks, 3×3 stem) or He et al.'s ResNet-20.

    ``wide=True`` doubles the bottleneck width: Wide-ResNet-50-2 (BMIA Figure 4) at depth 50.
    """
    if wide and depth != 50:
        raise ValueError(f"model.wide: only for depth 50 (Wide-ResNet-50-2), got depth {depth}")
    if depth == 20:
        from miarepro.resnet20 import ResNet20

        return ResNet20(input_shape[0], n_classes)
    from torch import nn

    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models import resnet as tv

    block, layers = _TORCHVISION_RESNETS[depth]
    model = tv.ResNet(getattr(tv, block), layers, num_classes=n_classes,
                      width_per_group=128 if wide else 64)
    model.conv1 = nn.Conv2d(input_shape[0], 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def densenet(input_shape: tuple[int, ...], n_classes: int,
             depth: Literal[121, 169] = 121) -> nn.Module:
    """torchvision DenseNet-121/169 with a 3×3 stem and no initial pooling (BMIA's CIFAR-100)."""
    from torch import nn

    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models import densenet as tv

    model = getattr(tv, f"densenet{depth}")(num_classes=n_classes)
    model.features.conv0 = nn.Conv2d(input_shape[0], 64, 3, 1, 1, bias=False)
    model.features.pool0 = nn.Identity()
    return model


def mobile(input_shape: tuple[int, ...], n_classes: int,
           variant: Literal["mobilenet_v2", "efficientnet_b0"] = "mobilenet_v2") -> nn.Module:
    """torchvision MobileNet-V2 or EfficientNet-B0 (BMIA Figure 4) with a stride-1 stem, the
    usual CIFAR adaptation: 32×32 inputs keep their resolution through the first block."""
    from torch import nn

    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision import models as tv

    model = getattr(tv, variant)(num_classes=n_classes)
    stem = model.features[0][0]
    model.features[0][0] = nn.Conv2d(input_shape[0], stem.out_channels, 3, stride=1, padding=1,
                                     bias=False)
    return model


class SearchSpace:
    """``Annotated[dict, SearchSpace()]``: an option that is an optuna search space
    (:mod:`miarepro.search`), checked when the config is validated."""

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            from miarepro.search import check_space

            check_space(value, where)


def catboost(input_shape: tuple[int, ...], n_classes: int,
             iterations: Annotated[int, Range(1)] = 300,
             depth: Annotated[int, Range(1, 16)] = 6,
             learning_rate: Annotated[float, Range(0, low_open=True)] = 0.1,
             l2_leaf_reg: Annotated[float, Range(0)] = 3.0,
             border_count: Annotated[int, Range(1, 65535)] = 254,
             trials: Annotated[int, Range(0)] = 0,
             folds: Annotated[int, Range(2)] = 5,
             space: Annotated[dict | None, SearchSpace()] = None) -> nn.Module:
    """Gradient-boosted trees (QMIA's tabular targets), trained by :mod:`miarepro.boosting`:
    not a torch module, so white-box attacks cannot use it. ``border_count``: the bins each
    feature is quantised into (CatBoost's default on a CPU); a tree's split search costs in
    proportion, which on a few thousand records is most of the training. ``trials > 0``: tune
    by optuna with ``folds``-fold cross-validation on the model's own training set (over
    ``space``)."""
    raise ValueError("catboost models are trained by miarepro.boosting, not built as torch "
                     "modules; white-box attacks need a torch architecture")


def wrn(input_shape: tuple[int, ...], n_classes: int, depth: Annotated[int, Range(10)] = 28,
        width: Width = 10, dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0
        ) -> nn.Module:
    """Wide-ResNet-``depth``-``width`` of Zagoruyko & Komodakis (2016), the CIFAR network of
    QMIA's Appendix A (WRN-28 with widths 1, 2, 5, 10): pre-activation basic blocks, three
    groups of ``(depth - 4) / 6`` blocks with 16k, 32k and 64k channels."""
    from torch import nn

    if (depth - 4) % 6:
        raise ValueError(f"model.depth: a WRN has depth 6n + 4, got {depth}")
    blocks = (depth - 4) // 6

    class Block(nn.Module):
        def __init__(self, inputs: int, outputs: int, stride: int) -> None:
            super().__init__()
            self.bn1, self.bn2 = nn.BatchNorm2d(inputs), nn.BatchNorm2d(outputs)
            self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
            self.drop = nn.Dropout(dropout)
            self.shortcut = (nn.Identity() if inputs == outputs and stride == 1
                             else nn.Conv2d(inputs, outputs, 1, stride, bias=False))

        def forward(self, x):
            out = nn.functional.relu(self.bn1(x))
            skip = x if isinstance(self.shortcut, nn.Identity) else self.shortcut(out)
            out = self.conv1(out)
            out = self.conv2(self.drop(nn.functional.relu(self.bn2(out))))
            return out + skip

    layers: list[nn.Module] = [nn.Conv2d(input_shape[0], 16, 3, 1, 1, bias=False)]
    channels = 16
    for group, stride in zip((16, 32, 64), (1, 2, 2), strict=True):
        for b in range(blocks):
            layers.append(Block(channels, group * width, stride if b == 0 else 1))
            channels = group * width
    layers += [nn.BatchNorm2d(channels), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(channels, n_classes)]
    return nn.Sequential(*layers)


def convnext(input_shape: tuple[int, ...], n_classes: int,
             variant: Literal["tiny", "small", "base"] = "tiny", weights: str | None = None,
             resize: Annotated[int, Range(1)] | None = None) -> nn.Module:
    """torchvision ConvNeXt (QMIA's quantile model: ConvNeXt-Tiny at 224 x 224), with a new
    ``n_classes`` head. ``weights``: a state-dict file of torchvision's ImageNet weights,
    loaded tensors-only; ``resize``: inputs are upsampled to this size first."""
    from torch import nn

    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision import models as tv

    model = getattr(tv, f"convnext_{variant}")()
    if weights is not None:
        from miarepro.io import load_checkpoint

        if not Path(weights).is_file():
            raise FileNotFoundError(
                f"model.weights: {weights} not found; save torchvision's "
                f"ConvNeXt_{variant.capitalize()}_Weights.IMAGENET1K_V1 state dict there "
                "(torch.save(model.state_dict(), path) on a machine with internet)")
        model.load_state_dict(load_checkpoint(weights))
    head = model.classifier[-1]
    model.classifier[-1] = nn.Linear(head.in_features, n_classes)
    if input_shape[0] != 3:  # grey images: repeat the channel, as the weights expect RGB

        class RepeatChannels(nn.Module):
            def forward(self, x):
                return x.expand(-1, 3, -1, -1)

        model = nn.Sequential(RepeatChannels(), model)
    if resize:
        model = nn.Sequential(nn.Upsample(size=(resize, resize), mode="bilinear"), model)
    return model


#: Architectures that convolve images (channels x height x width); the rest flatten any input.
IMAGE_ARCHITECTURES = frozenset({"lenet", "cnn", "resnet", "densenet", "mobile", "wrn",
                                 "convnext"})
ARCHITECTURES = {"mlp": mlp, "logistic": logistic, "lenet": lenet, "cnn": cnn, "resnet": resnet,
                 "densenet": densenet, "mobile": mobile, "wrn": wrn, "convnext": convnext,
                 "catboost": catboost}


class ArchitectureSpec:
    """``Annotated[dict, ArchitectureSpec()]``: an option that is itself a model spec (QMIA's
    backbone), checked like a study's ``model`` when the config is validated."""

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            check_architecture(value, where)


def check_architecture(spec: dict[str, Any], where: str = "model") -> None:
    """Reject an unknown ``arch`` or an option its builder does not take, naming the key."""
    params = dict(spec)
    arch = params.pop("arch", None)
    if arch not in ARCHITECTURES:
        raise ValueError(f"{where}.arch: " + unknown("architecture", arch, ARCHITECTURES))
    check_options(ARCHITECTURES[arch], params, where, f"architecture {arch!r}", skip=2)


def stacking_obstacle(architecture: dict[str, Any], recipe: dict[str, Any]) -> str | None:
    """Why :func:`miarepro.training.train_stacked` cannot train models of ``architecture``
    with ``recipe``, or None if it can: read from the config alone (no torch), so that a
    config asking for it fails at dry run."""
    if architecture.get("arch") != "mlp":
        return f"only MLPs train stacked, not {architecture.get('arch')!r}"
    if architecture.get("dropout"):
        return "dropout draws its masks from the global random stream, which a stack shares"
    if recipe.get("dp") is not None:
        return "DP-SGD trains one model at a time (opacus)"
    if recipe.get("augment"):
        return "augmentation draws from the global random stream, which a stack shares"
    return None


def build_model(spec: dict[str, Any], input_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """Instantiate ``spec['arch']`` with the remaining keys as its keyword arguments."""
    check_architecture(spec)
    params = dict(spec)
    return ARCHITECTURES[params.pop("arch")](tuple(input_shape), n_classes, **params)
