"""Atomic file output and checked readers shared by every step.

Every writer goes through :func:`atomic_path`, so an interrupted job never leaves a file that
looks complete: data goes to a temporary name in the same directory and is renamed at the end.
A temporary file left by a job killed outright (``kill -9``, a node failure) is removed when
the output is next written. Outputs get the permissions the umask allows, as files created any
other way would, so colleagues on a shared cluster can read them.

Every reader turns a truncated or corrupt file into a :class:`CorruptFile` error that names the
file and what to do, instead of a bare exception from deep inside numpy, pandas or torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np


class CorruptFile(OSError):
    """A file the workflow wrote cannot be read back; the message names it and the fix."""


def remake_advice(path: str | os.PathLike[str]) -> str:
    """What to do about a file that cannot be read: Snakemake remakes a file named by
    ``--forcerun``, and everything made from it, whether the file is there or not."""
    return (f"Run the same snakemake command again with `--forcerun {path}` added: it remakes "
            "this file and everything made from it.")


def _corrupt(path: str | os.PathLike[str], error: BaseException) -> CorruptFile:
    return CorruptFile(f"{path} cannot be read ({type(error).__name__}: {error}): it is "
                       f"truncated or corrupt. {remake_advice(path)}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` only on success."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    for orphan in final.parent.glob(f".{final.name}.*"):  # left by a job killed mid-write
        with contextlib.suppress(FileNotFoundError):
            orphan.unlink()
    handle, temporary = tempfile.mkstemp(
        dir=final.parent, prefix=f".{final.name}.", suffix=final.suffix
    )
    os.close(handle)
    try:
        yield Path(temporary)
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600 files
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
    try:
        return json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise _corrupt(path, error) from error


def write_arrays(path: str | os.PathLike[str], **arrays: np.ndarray) -> None:
    """Save named arrays as an uncompressed ``.npz`` (no pickled objects allowed on load)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


def read_arrays(path: str | os.PathLike[str],
                keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, or only ``keys``: the others are never read (a job that
    needs a dataset's labels does not load its images: ImageNet's are 63 GB)."""
    with _open_npz(path) as data:
        return {key: data[key] for key in (data.files if keys is None else keys)}


@contextlib.contextmanager
def _open_npz(path: str | os.PathLike[str]) -> Iterator[Any]:
    """An ``.npz`` file opened without pickles; a damaged one (there or in a member read from
    it) fails with its path and the command that remakes it."""
    try:
        with np.load(path, allow_pickle=False) as data:
            yield data
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise _corrupt(path, error) from error


@contextlib.contextmanager
def reading(source: object) -> Iterator[None]:
    """Count the time of the block as ``source``'s ``read_seconds`` (where it keeps one: a
    :class:`LazyArrays` fit, a study's files), which an attack's timing leaves out: loading
    what was saved, and the libraries that rebuild it, is not the attack's work."""
    start = time.perf_counter()
    try:
        yield
    finally:
        if hasattr(source, "read_seconds"):
            source.read_seconds += time.perf_counter() - start


class LazyArrays(Mapping[str, np.ndarray]):
    """The arrays of an ``.npz`` file, each read on first use and then kept: a score job of
    IHA reads its fit's eigenvalues and the audit's projections, not the eigenbasis beside
    them (183 MB for the MNIST MLP, most of such a job's time when read whole).
    ``read_seconds`` is the time spent reading, which an attack's timing leaves out."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        with _open_npz(path) as data:
            self._keys = list(data.files)
        self._read: dict[str, np.ndarray] = {}
        self.read_seconds = 0.0

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._read:
            if key not in self._keys:
                raise KeyError(key)
            start = time.perf_counter()
            self._read[key] = read_arrays(self.path, [key])[key]
            self.read_seconds += time.perf_counter() - start
        return self._read[key]

    def __contains__(self, key: object) -> bool:  # Mapping's would read the array
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


def write_array(path: str | os.PathLike[str], array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, array)


def read_array(path: str | os.PathLike[str], mmap: bool = False) -> np.ndarray:
    """One ``.npy`` array (memory-mapped if asked), checked for truncation."""
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, EOFError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise _corrupt(path, error) from error


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


def read_table(path: str | os.PathLike[str]) -> Any:
    """A parquet or CSV table written by :func:`write_table`."""
    import pandas as pd

    try:
        return pd.read_parquet(path) if Path(path).suffix == ".parquet" else pd.read_csv(path)
    except FileNotFoundError:
        raise
    except Exception as error:  # pyarrow and pandas raise many kinds for a damaged file
        raise _corrupt(path, error) from error


def save_checkpoint(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """``torch.save`` through a buffer: saving to a file names the archive's folder after the
    file, so a checkpoint written to a temporary path would carry its random name, and two
    equal models would differ in their bytes."""
    import torch

    buffer = BytesIO()
    torch.save(state, buffer)
    Path(path).write_bytes(buffer.getvalue())


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A model's ``state_dict``, unpickling tensors only (``weights_only=True``)."""
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as error:
        raise CorruptFile(  # torch's own message suggests unpickling it: not repeated here
            f"{path} is not a checkpoint of plain tensors ({type(error).__name__}). It is "
            "truncated, corrupt or not written by this workflow, and is not loaded for safety. "
            + remake_advice(path)) from error


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def read_yaml(text: str) -> Any:
    """Parse YAML text safely, with libyaml's C parser where PyYAML was built with it (about
    ten times faster than the pure-Python one: every artifact job reads the catalog)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_config_yaml(path: str | Path) -> Any:
    """A config file, parsed strictly: a key given twice in one mapping (YAML keeps the last
    and drops the first without a word) or a syntax error raises ValueError naming the file
    and the line."""
    import yaml

    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: keys it may override
                continue
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise ValueError(f"{path}, line {key_node.start_mark.line + 1}: key {key!r} is "
                                 f"given twice in one mapping (first on line {seen[key]}); "
                                 "YAML would silently keep only the last")
            seen[key] = key_node.start_mark.line + 1
        loader.flatten_mapping(node)
        return dict(loader.construct_pairs(node, deep=deep))

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"{path}{where}: not valid YAML: {error.problem or error}") from None
