"""Files of a small study for tests that run a workflow step directly: a labelled dataset and
its 25/25/50 partition split (target train, target test, reference pool)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from miarepro import io, pipeline


def partition_study(directory: Path, n: int, rng: np.random.Generator) -> tuple[Path, str]:
    """``n`` records of 3 classes (no features to speak of) and their split: the dataset's path
    and the split's."""
    dataset = directory / "data.npz"
    io.write_arrays(dataset, X=np.zeros((n, 2), np.float32), y=rng.integers(0, 3, n))
    io.write_json(directory / "data.json", {"n_classes": 3, "meta": {}})
    split = str(directory / "split.npz")
    pipeline.make_split(str(dataset), {"scheme": "partition", "seed": 0, "fractions": {
        "target_train": 0.25, "target_test": 0.25, "reference_pool": 0.5}}, split)
    return dataset, split
