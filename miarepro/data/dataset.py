"""The one in-memory form every dataset takes, whatever its source.

Downstream steps (splits, training, signals) only ever see a :class:`Dataset`, so a paper's
experiment does not care whether its data came from torchvision, a tabular archive or a
generator. The checks in ``__post_init__`` catch a loader that returns the wrong dtype or shape
at load time instead of deep inside training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

TASKS = ("classification", "regression")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Arrays plus the facts needed to build a model for them.

    ``X`` is float32 with shape ``(M, *input_shape)``: images channel-first in [0, 1], tabular
    data 2-D. ``y`` is int64 class labels in ``[0, n_classes)`` for classification and float32
    targets for regression (``n_classes == 0``). ``meta`` holds JSON-friendly facts (source,
    citation, licence, generator parameters, ...) that the workflow stores next to the arrays.
    """

    X: np.ndarray
    y: np.ndarray
    n_classes: int
    input_shape: tuple[int, ...]
    name: str
    task: str = "classification"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"dataset {self.name!r}: task must be one of {TASKS}, "
                             f"got {self.task!r}")
        if self.X.dtype != np.float32:
            raise TypeError(f"dataset {self.name!r}: X must be float32, got {self.X.dtype}")
        if self.X.shape[1:] != tuple(self.input_shape):
            raise ValueError(f"dataset {self.name!r}: X has shape {self.X.shape}, expected "
                             f"(M, *{tuple(self.input_shape)})")
        if self.y.shape != (len(self.X),):
            raise ValueError(f"dataset {self.name!r}: y has shape {self.y.shape}, expected "
                             f"({len(self.X)},)")
        if self.task == "regression":
            if self.y.dtype != np.float32 or self.n_classes != 0:
                raise ValueError(f"dataset {self.name!r}: regression needs float32 targets "
                                 f"and n_classes == 0")
            return
        if self.y.dtype != np.int64:
            raise TypeError(f"dataset {self.name!r}: labels must be int64, got {self.y.dtype}")
        if len(self.y) and (self.y.min() < 0 or self.y.max() >= self.n_classes):
            raise ValueError(f"dataset {self.name!r}: labels must lie in [0, {self.n_classes})")

    def __len__(self) -> int:
        return len(self.y)
