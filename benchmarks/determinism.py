"""Does one seed give one model? Each architecture trained twice with the same seed on the
device the workflow would use (a GPU where there is one), and the largest difference between
the two models' weights: 0 where training is deterministic.

    python benchmarks/determinism.py [--arch resnet:20 --arch convnext:tiny ...] [--epochs 3]

On a CPU training is deterministic; on a GPU, cuDNN's default convolution backward is not,
which :func:`miarepro.training.device` turns off. Measured on an H200, 3 epochs: 0 for every
architecture above; without the setting, 0.0016 for Stolen Memories' LeNet and 0.46 for the
ResNet-20.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

ARCHITECTURES = {"mlp": {"arch": "mlp", "widths": [64]}, "lenet": {"arch": "lenet"},
                 "lenet:stolen_memories": {"arch": "lenet", "variant": "stolen_memories"},
                 "resnet:20": {"arch": "resnet", "depth": 20},
                 # QMIA's backbone, upsampled as at 224 x 224
                 "convnext:tiny": {"arch": "convnext", "variant": "tiny", "resize": 64}}
DEFAULT = ("mlp", "lenet", "lenet:stolen_memories", "resnet:20")


def max_difference(architecture: dict, epochs: int) -> tuple[float, float]:
    """The largest absolute difference between two models trained alike, and one's seconds."""
    import torch

    from miarepro.training import train_model

    rng = np.random.default_rng(0)
    mlp = architecture["arch"] == "mlp"
    X = rng.random((512, 60) if mlp else (512, 3, 32, 32), dtype=np.float32)
    y = rng.integers(0, 10, 512)
    recipe = {"epochs": epochs, "batch_size": 64, "lr": 0.05}
    models, seconds = [], 0.0
    for _ in range(2):
        start = time.perf_counter()
        models.append(train_model(X, y, np.arange(512), architecture, recipe, 10, seed=7).model)
        seconds = time.perf_counter() - start
    return max(float((a - b).abs().max()) for a, b in zip(
        models[0].state_dict().values(), models[1].state_dict().values(), strict=True)
        if torch.is_floating_point(a)), seconds


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", choices=list(ARCHITECTURES))
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    print(f"device: {'cuda' if torch.cuda.is_available() else 'cpu'}")
    for name in args.arch or DEFAULT:
        difference, seconds = max_difference(ARCHITECTURES[name], args.epochs)
        print(f"{name}: largest weight difference {difference:.3g} ({seconds:.1f} s a model)")


if __name__ == "__main__":
    main()
