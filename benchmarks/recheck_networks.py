"""The study's networks rebuilt from their saved weights without the package: an MLP, LeNet-5
(torch's functional convolutions: numpy has none), the BiGAN's dense or convolutional
generator and the black-box BiGAN's dense encoder. A rebuilt target's logits are checked
against those it saved (:func:`saved_logits`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
from recheck_inputs import NotRechecked
from scipy import special

LEAKY_SLOPE = 0.01  # torch's default negative slope, the models' LeakyReLU


def dense_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                  activation: str, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """An MLP's ``(h, output)``: ``h`` the input of its last layer (Subpop's latent), the
    activation between layers (relu, leaky_relu, or a GAN's LeakyReLU of slope 0.2)."""
    slopes = {"relu": 0.0, "leaky_relu": LEAKY_SLOPE, "gan": 0.2}
    layers = [(weight.astype(dtype), bias.astype(dtype)) for weight, bias in layers]
    h = x.reshape(len(x), -1).astype(dtype)
    for weight, bias in layers[:-1]:
        h = h @ weight.T + bias
        h = np.where(h > 0, h, dtype(slopes[activation]) * h)
    return h, h @ layers[-1][0].T + layers[-1][1]


def conv_features(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                  dtype: type = np.float64, flat: bool = True) -> np.ndarray:
    """Classic LeNet-5's convolutional part, flattened unless not ``flat``: each 4-d weight a
    convolution padded to keep the image's size, then ReLU and a 2x2 max-pool (the dense
    layers are skipped). Torch's functional convolutions: numpy has none."""
    import torch
    from torch.nn import functional

    as_torch = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    h = torch.as_tensor(x, dtype=as_torch)
    with torch.no_grad():
        for weight, bias in (layer for layer in layers if layer[0].ndim == 4):
            weight, bias = torch.as_tensor(weight, dtype=as_torch), torch.as_tensor(
                bias, dtype=as_torch)
            h = functional.max_pool2d(functional.relu(functional.conv2d(
                h, weight, bias, padding=weight.shape[-1] // 2)), 2)
    return (h.flatten(1) if flat else h).numpy()


def lenet_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                  dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Classic LeNet-5's ``(h, output)`` (Subpop's convolutional victim): its convolutional
    part (:func:`conv_features`), then dense ReLU layers, ``h`` the input of the last."""
    return dense_forward([layer for layer in layers if layer[0].ndim == 2],
                         conv_features(layers, x, dtype), "relu", dtype)


def conv_generator(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray,
                   shape: list[int]) -> np.ndarray:
    """Subpop's convolutional BiGAN generator (Appendix A.1) on standardised latents, before
    its output function: a dense layer to a grid of cells (its channels are the first
    transposed convolution's inputs), then 2x2 stride-2 transposed convolutions (kernel 2)
    and 3x3 convolutions padded by 1 (kernel 3), LeakyReLU 0.2 after every layer but the last;
    the image cropped from the grid's centre. Float32: the check is statistical."""
    import torch
    from torch.nn import functional

    (first, first_bias), *blocks = [(torch.as_tensor(w, dtype=torch.float32),
                                     torch.as_tensor(b, dtype=torch.float32)) for w, b in layers]
    with torch.no_grad():
        h = functional.leaky_relu(functional.linear(torch.as_tensor(z, dtype=torch.float32),
                                                    first, first_bias), 0.2)
        channels = blocks[0][0].shape[0]
        cells = math.isqrt(h.shape[1] // channels)
        h = h.reshape(len(h), channels, cells, cells)
        for k, (weight, bias) in enumerate(blocks):
            h = (functional.conv_transpose2d(h, weight, bias, stride=2) if weight.shape[-1] == 2
                 else functional.conv2d(h, weight, bias, padding=1))
            h = functional.leaky_relu(h, 0.2) if k < len(blocks) - 1 else h
        top, left = (h.shape[-2] - shape[1]) // 2, (h.shape[-1] - shape[2]) // 2
        return h[..., top:top + shape[1], left:left + shape[2]].numpy()


def layers_of(state: dict, prefix: str = "") -> list[tuple[np.ndarray, np.ndarray]]:
    """The ``(weight, bias)`` of every layer under ``prefix`` (dense or convolutional), in the
    order saved, float64; a layer saved without a bias has zeros."""
    names = [k[:-len(".weight")] for k in state if k.startswith(prefix) and k.endswith(".weight")]
    return [(np.asarray(state[f"{n}.weight"], np.float64),
             np.asarray(state.get(f"{n}.bias", np.zeros(len(state[f"{n}.weight"]))),
                        np.float64))
            for n in names]


def victim(card: dict, state: dict) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The target rebuilt from its weights, ``(x, dtype) -> (h, logits)``: an MLP or LeNet."""
    layers, arch = layers_of(state), card["architecture"]
    if arch["arch"] == "mlp":
        activation = arch.get("activation", "relu")
        return lambda x, dtype=np.float64: dense_forward(layers, x, activation, dtype)
    if arch["arch"] == "lenet" and arch.get("variant", "classic") == "classic":
        return lambda x, dtype=np.float64: lenet_forward(layers, x, dtype)
    raise NotRechecked(f"a {arch} victim")


def saved_target(home: Path, t: int) -> tuple[dict, dict]:
    """Target ``t``'s card and weights, as the run saved them (tensors only: nothing
    unpickled)."""
    import torch

    card = json.loads((home / "models" / "target" / f"{t}.json").read_text())
    return card, torch.load(home / "models" / "target" / f"{t}.pt", weights_only=True)


def saved_logits(home: Path, t: int, rebuilt: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Target ``t``'s first query's saved logits (float64), once ``rebuilt``, the logits of
    the target rebuilt here on ``rows``, are checked against them."""
    saved = np.load(home / "models" / "target" / f"{t}.npy")[0].astype(np.float64)
    if not np.allclose(rebuilt, saved[rows], rtol=1e-4, atol=1e-4 * np.abs(saved).max()):
        raise SystemExit(f"{home.name} target {t}: the rebuilt target's logits differ from "
                         "those it saved")
    return saved


def generator(fit: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The white-box BiGAN's generator rebuilt from the fit, latents to records (float32):
    its standardisation, dense (LeakyReLU 0.2) or convolutional body, sigmoid output for data
    in [0, 1]."""
    spec = json.loads(str(fit["spec"]))
    body = layers_of(fit, "generator.body.")
    centre, scale = fit["generator.standardise.mean"], fit["generator.standardise.scale"]

    def decode(latents: np.ndarray) -> np.ndarray:
        z = (latents - centre) / scale
        pixels = (dense_forward(body, z, "gan", np.float32)[1] if spec["networks"] == "mlp"
                  else conv_generator(body, z, spec["shape"]))
        pixels = pixels.reshape(len(z), *spec["shape"])
        return special.expit(pixels) if spec["sigmoid"] else pixels

    return decode


def encoder(fit: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The black-box BiGAN's own encoder rebuilt from the fit, records to latents: dense
    layers of LeakyReLU 0.2 (a convolutional one is not rechecked)."""
    if json.loads(str(fit["spec"]))["networks"] != "mlp":
        raise NotRechecked("a convolutional BiGAN encoder")
    layers = layers_of(fit, "encoder.")
    return lambda x: dense_forward(layers, x, "gan")[1]


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return special.logsumexp(logits, -1) - np.take_along_axis(logits, labels[..., None], -1)[
        ..., 0]
