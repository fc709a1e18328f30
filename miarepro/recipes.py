"""A training recipe's defaults: the values a study's ``training`` block may leave out.

Apart from :mod:`miarepro.training` so that code that only reads a recipe (IHA's Eq. 8 needs
the target's step, momentum and weight decay) does not import torch for it.
"""

from __future__ import annotations

from typing import Any

DEFAULT_RECIPE: dict[str, Any] = {
    "optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0,
    "epochs": 10, "batch_size": 128, "milestones": [], "gamma": 0.1, "loss": "cross_entropy",
    "augment": [],
}
