"""A failed job's traceback lands in its own log file, which Snakemake prints."""

import logging
import sys
from types import SimpleNamespace

from miarepro import logs


def test_uncaught_exception_is_written_to_the_job_log(tmp_path):
    log_file = tmp_path / "job.log"
    previous_hook = sys.excepthook
    try:
        logs.setup(SimpleNamespace(log=[str(log_file)]))
        try:
            raise ValueError("split.fractions sum to 1.6")
        except ValueError:
            sys.excepthook(*sys.exc_info())
        logging.shutdown()
    finally:
        sys.excepthook = previous_hook
        logging.basicConfig(force=True, handlers=[logging.NullHandler()])
    text = log_file.read_text()
    assert "Traceback (most recent call last)" in text
    assert "ValueError: split.fractions sum to 1.6" in text
