"""Send a job's Python logging to its Snakemake log file and to stderr."""

from __future__ import annotations

import logging
from typing import Any


def setup(snakemake: Any) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if snakemake.log:
        handlers.append(logging.FileHandler(str(snakemake.log[0]), mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
