"""The config's schema, its error, and reading config files: what loading a config needs
before any check of its names (:mod:`miarepro.config`) or merging of the configs it includes
(:mod:`miarepro.includes`), both of which build on this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from miarepro import io

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "config" / "schema.yaml"
#: What a study with ``models_from`` takes from its source: the models and how they were made.
INHERITED = ("dataset", "split", "model", "training", "targets", "queries",
             "ten_per_job", "train_stacked")


class ConfigError(ValueError):
    """A config value is invalid; the message names the key path."""


def load_schema() -> dict[str, Any]:
    return io.read_yaml(SCHEMA_PATH.read_text())


def read_file(path: str | Path) -> dict[str, Any]:
    """A config file, read strictly (:func:`miarepro.io.read_config_yaml`): a key given twice
    or a syntax error fails naming the file and the line."""
    try:
        return io.read_config_yaml(path)
    except ValueError as error:
        raise ConfigError(f"config file {error}") from None


def check_files(paths: list[str]) -> None:
    """Snakemake reads ``--configfile`` with a loader that keeps the last of two equal keys and
    says nothing; read each file again strictly, so a duplicate fails before any job."""
    for path in paths:
        read_file(path)

