"""Atomic file output and small readers/writers shared by every step.

Every writer goes through :func:`atomic_path`, so an interrupted job never leaves a file that
looks complete: data goes to a temporary name in the same directory and is renamed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` only on success."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=final.parent, prefix=f".{final.name}.", suffix=final.suffix
    )
    os.close(handle)
    try:
        yield Path(temporary)
        os.replace(temporary, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text())


def write_arrays(path: str | os.PathLike[str], **arrays: np.ndarray) -> None:
    """Save named arrays as an uncompressed ``.npz`` (no pickled objects allowed on load)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


def read_arrays(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def write_table(path: str | os.PathLike[str], frame: Any) -> None:
    """Write a pandas DataFrame as parquet or CSV, chosen by the file suffix."""
    suffix = Path(path).suffix
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            raise ValueError(f"unsupported table suffix {suffix!r} for {path}")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")
