"""Send a job's Python logging, and the traceback that ends a failed job, to its log file.

Snakemake shows a failed job's log file, so the error must be there, not only on stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def setup(snakemake: Any) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if snakemake.log:
        handlers.append(logging.FileHandler(str(snakemake.log[0]), mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")

    def log_failure(kind, value, traceback) -> None:
        logging.getLogger("miarepro").critical("job failed", exc_info=(kind, value, traceback))

    sys.excepthook = log_failure
