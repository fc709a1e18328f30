"""The BiGAN of Subpop (Appendix A.1): a generator that maps a victim's latent back to an input.

A BiGAN (Donahue et al. 2017) trains a generator ``G: z -> x`` against a discriminator that sees
*pairs* ``(x, z)``: real pairs ``(x, E(x))`` from an encoder, fake pairs ``(G(z), z)``. At the
optimum ``G`` inverts ``E``. Subpop replaces the encoder by the victim's frozen feature
extractor ``h`` (its last hidden layer) and feeds the generator ``h(x)`` of the attacker's own
records instead of a prior, so that ``G(h(x) + noise)`` crafts records that the *victim* sees
near ``x``: a subpopulation. The black-box variant is a standard BiGAN: the encoder is trained
with the generator and latents come from a standard normal prior.

Two families of networks, as in the paper: fully connected ones for MLP victims (generator
``d -> 128 -> 256 -> 512 -> 1024 -> image``, discriminator over the concatenated image and
latent, ``1024 -> 512 -> 256 -> 128 -> 100 -> 1``), and convolutional ones for LeNet / ResNet-20
victims (dense 512 per cell of a small grid, four blocks of a 2x2 stride-2 transposed
convolution and a 3x3 convolution, 512 / 256 / 128 / 64 filters; the discriminator's four
stride-2 3x3 convolutions of 128 / 256 / 512 / 1024 filters, the latent concatenated after
them, dense 64, dense 1). Widths are parameters, so a miniature can shrink them. Choices the
paper leaves open (matrix §5.3), recorded with the studies: the generator's grid starts at
``ceil(side / 16)`` so four doublings cover the image (the text's 1x1 start gives 16x16, not
the 32x32 it states) and is cropped to the image; its output is a sigmoid for data in [0, 1]
and linear otherwise; LeakyReLU slope 0.2; Adam (lr 2e-4, betas 0.5 / 0.999, the DCGAN
recipe); the non-saturating binary cross-entropy losses; the plain-GAN pre-training shows the
discriminator a zero latent.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

Networks = Literal["mlp", "conv"]
#: the paper's widths (Appendix A.1) per family: generator, discriminator
PAPER_WIDTHS = {"mlp": ((128, 256, 512, 1024), (1024, 512, 256, 128, 100)),
                "conv": ((512, 256, 128, 64), (128, 256, 512, 1024))}
_SLOPE = 0.2


def _dense(sizes: list[int]) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.LeakyReLU(_SLOPE)]
    return layers


class Standardise(nn.Module):
    """A fixed per-activation affine map ``(z - mean) / scale``: a victim's raw activations
    (non-negative, of any magnitude) become unit-scale inputs for the generator and the
    discriminator. Set once from the attacker's latents; saved with the networks."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("scale", torch.ones(size))

    def fit(self, z: torch.Tensor) -> None:
        self.mean.copy_(z.mean(0))
        self.scale.copy_(z.std(0).clamp_min(1e-6))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return (z - self.mean) / self.scale


class Generator(nn.Module):
    """``G: (n, latent) -> (n, *shape)``, fully connected or convolutional."""

    def __init__(self, latent: int, shape: tuple[int, ...], networks: Networks,
                 widths: list[int], sigmoid: bool) -> None:
        super().__init__()
        self.shape, self.networks = tuple(shape), networks
        self.standardise = Standardise(latent)
        if networks == "mlp":
            self.body = nn.Sequential(*_dense([latent, *widths]),
                                      nn.Linear(widths[-1], math.prod(shape)))
        else:
            channels, side = shape[0], max(shape[1:])
            self.cells = math.ceil(side / 16)
            blocks: list[nn.Module] = [nn.Linear(latent, 512 * self.cells**2), nn.LeakyReLU(_SLOPE),
                                       nn.Unflatten(1, (512, self.cells, self.cells))]
            previous = 512
            for k, width in enumerate(widths):
                last = k == len(widths) - 1
                blocks += [nn.ConvTranspose2d(previous, width, 2, stride=2), nn.LeakyReLU(_SLOPE),
                           nn.Conv2d(width, channels if last else width, 3, padding=1)]
                blocks += [] if last else [nn.LeakyReLU(_SLOPE)]
                previous = width
            self.body = nn.Sequential(*blocks)
        self.out = nn.Sigmoid() if sigmoid else nn.Identity()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.body(self.standardise(z))
        if self.networks == "mlp":
            return self.out(x).reshape(len(z), *self.shape)
        height, width = self.shape[1:]
        top, left = (x.shape[-2] - height) // 2, (x.shape[-1] - width) // 2
        return self.out(x[..., top : top + height, left : left + width])


class Discriminator(nn.Module):
    """``D: (x, z) -> (n,)`` logits of "real pair"; the latent joins after the image layers."""

    def __init__(self, latent: int, shape: tuple[int, ...], networks: Networks,
                 widths: list[int]) -> None:
        super().__init__()
        self.standardise = Standardise(latent)
        if networks == "mlp":  # Appendix A.1: the image and latent concatenated at the input
            self.image = nn.Flatten()
            joined = math.prod(shape) + latent
            self.head = nn.Sequential(*_dense([joined, *widths]), nn.Linear(widths[-1], 1))
        else:  # the latent joins "at the middle", after the convolutions
            layers: list[nn.Module] = []
            previous = shape[0]
            for width in widths:
                layers += [nn.Conv2d(previous, width, 3, stride=2, padding=1),
                           nn.LeakyReLU(_SLOPE)]
                previous = width
            self.image = nn.Sequential(*layers, nn.Flatten())
            with torch.no_grad():
                flat = self.image(torch.zeros(1, *shape)).shape[1]
            self.head = nn.Sequential(*_dense([flat + latent, 64]), nn.Linear(64, 1))

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.image(x), self.standardise(z)], dim=1))[:, 0]


def encoder(latent: int, shape: tuple[int, ...], networks: Networks,
            widths: list[int]) -> nn.Module:
    """The black-box variant's own encoder ``E: x -> z``: the discriminator's image layers
    (the fully connected ones in reverse order of the generator's), then a linear map."""
    if networks == "mlp":
        return nn.Sequential(nn.Flatten(), *_dense([math.prod(shape), *reversed(widths)]),
                             nn.Linear(widths[0], latent))
    image = Discriminator(latent, shape, networks, widths).image
    with torch.no_grad():
        flat = image(torch.zeros(1, *shape)).shape[1]
    return nn.Sequential(image, nn.Linear(flat, latent))


def build(spec: dict[str, Any]) -> tuple[Generator, Discriminator, nn.Module | None]:
    """Generator, discriminator and (black-box only) encoder of a saved ``spec``."""
    shape, latent, networks = tuple(spec["shape"]), int(spec["latent"]), spec["networks"]
    generator = Generator(latent, shape, networks, spec["generator_widths"], spec["sigmoid"])
    discriminator = Discriminator(latent, shape, networks, spec["discriminator_widths"])
    own = (encoder(latent, shape, networks, spec["generator_widths"])
           if spec["own_encoder"] else None)
    return generator, discriminator, own


def train(images: torch.Tensor, latents: torch.Tensor | None, spec: dict[str, Any],
          epochs: int, batch_size: int, lr: float, seed: int, gan_epochs: int = 0,
          measure: Callable[[torch.Tensor], torch.Tensor] | None = None,
          cosine_weight: float = 0.0) -> tuple[Generator, nn.Module | None, dict[str, list[float]]]:
    """Train a BiGAN on ``images`` and return the generator, the encoder and a per-epoch log.

    ``latents`` are the fixed encoder's ``h(x)`` of ``images`` (Subpop's BiGAN: real pairs
    ``(x, h(x))``, fake pairs ``(G(h(x')), h(x'))`` for other records ``x'``); ``None`` trains
    the spec's own encoder (standard BiGAN, ``z ~ N(0, I)``). ``gan_epochs`` of plain-GAN
    pre-training come first (CIFAR in the paper). ``measure`` maps generated images to the
    encoder's latents; the log keeps the mean cosine similarity between ``h(G(z))`` and ``z``,
    the paper's "good enough" criterion (its threshold is lost; we train a fixed number of
    epochs and report the curve).
    """
    torch.manual_seed(seed)
    generator, discriminator, own = build(spec)
    generator, discriminator = generator.to(images.device), discriminator.to(images.device)
    if latents is not None:
        generator.standardise.fit(latents)
        discriminator.standardise.fit(latents)
    trained = list(generator.parameters()) + (list(own.to(images.device).parameters())
                                              if own is not None else [])
    g_opt = torch.optim.Adam(trained, lr=lr, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
    bce = nn.functional.binary_cross_entropy_with_logits
    rng = torch.Generator(device="cpu").manual_seed(seed)
    n, latent = len(images), int(spec["latent"])
    log: dict[str, list[float]] = {"d_loss": [], "g_loss": [], "cosine": []}

    def sample_z(rows: int) -> torch.Tensor:
        if latents is None:
            return torch.randn(rows, latent, generator=rng).to(images.device)
        return latents[torch.randint(n, (rows,), generator=rng)]

    for epoch in range(gan_epochs + epochs):
        plain = epoch < gan_epochs
        d_total = g_total = 0.0
        for batch in torch.randperm(n, generator=rng).split(batch_size):
            x = images[batch]
            z_in = sample_z(len(batch))
            fake = generator(z_in)
            z_real = own(x) if own is not None else latents[batch]
            z_fake = z_in
            if plain:  # a plain GAN: the discriminator judges images alone
                z_real, z_fake = torch.zeros_like(z_real), torch.zeros_like(z_in)
            ones = torch.ones(len(batch), device=x.device)
            d_loss = (bce(discriminator(x, z_real.detach()), ones)
                      + bce(discriminator(fake.detach(), z_fake), 1 - ones))
            d_opt.zero_grad()
            d_loss.backward()
            d_opt.step()
            # the discriminator's weights are not the generator's step's to train: frozen, their
            # gradients are not computed only to be discarded (the same generator bit for bit)
            discriminator.requires_grad_(False)
            g_loss = bce(discriminator(fake, z_fake), ones)
            if own is not None and not plain:  # the encoder fools D the other way round
                g_loss = g_loss + bce(discriminator(x, own(x)), 1 - ones)
            if cosine_weight and not plain:
                back = measure(fake) if measure is not None else own(fake)
                g_loss = g_loss + cosine_weight * (1 - nn.functional.cosine_similarity(
                    back, z_in, dim=1).mean())
            g_opt.zero_grad()
            g_loss.backward()
            g_opt.step()
            discriminator.requires_grad_(True)
            d_total += d_loss.item() * len(batch)
            g_total += g_loss.item() * len(batch)
        log["d_loss"].append(d_total / n)
        log["g_loss"].append(g_total / n)
        with torch.no_grad():
            z = sample_z(min(n, 512)) if own is None else own(images[:512])
            back = measure(generator(z)) if measure is not None else own(generator(z))
            log["cosine"].append(float(nn.functional.cosine_similarity(back, z, dim=1).mean()))
    generator.eval()
    if own is not None:
        own.eval()
    return generator, own, log


def noisy_latents(z: np.ndarray, beta: float, samples: int, rng: np.random.Generator
                  ) -> np.ndarray:
    """``(n, samples, d)``: ``z + eps``, ``eps_j ~ N(0, (beta z_j)^2)`` (matrix §5.1: noise
    proportional to each activation, so small activations stay small and the class stays)."""
    noise = rng.standard_normal((len(z), samples, z.shape[1]))
    return z[:, None, :] * (1.0 + beta * noise)
