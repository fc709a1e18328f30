"""Set up a job's process: its logging, and the threads its numeric libraries may use.

Snakemake shows a failed job's log file, so the error must be there, not only on stderr. Jobs
run side by side, each granted ``threads`` cores; OpenMP and BLAS default to every core of the
machine, so two jobs on two cores would run four busy threads (measured on IHA's scoring jobs:
12% longer). numpy and torch read the caps when they load, so scripts call :func:`setup` first.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def setup(snakemake: Any) -> None:
    for variable in THREAD_VARIABLES:  # a value set by the user wins
        os.environ.setdefault(variable, str(snakemake.threads))
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if snakemake.log:
        handlers.append(logging.FileHandler(str(snakemake.log[0]), mode="w"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")

    def log_failure(kind, value, traceback) -> None:
        logging.getLogger("miarepro").critical("job failed", exc_info=(kind, value, traceback))

    sys.excepthook = log_failure
