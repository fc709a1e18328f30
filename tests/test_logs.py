"""A failed job's traceback lands in its own log file, which Snakemake prints."""

import logging
import os
import sys
from types import SimpleNamespace

from miarepro import logs


def test_uncaught_exception_is_written_to_the_job_log(tmp_path, monkeypatch):
    for variable in logs.THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    log_file = tmp_path / "job.log"
    previous_hook = sys.excepthook
    try:
        logs.setup(SimpleNamespace(log=[str(log_file)], threads=3))
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


def test_a_job_caps_its_numeric_threads_unless_the_user_did(monkeypatch):
    for variable in logs.THREAD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    previous_hook = sys.excepthook
    try:
        logs.setup(SimpleNamespace(log=[], threads=2))
    finally:
        sys.excepthook = previous_hook
        logging.basicConfig(force=True, handlers=[logging.NullHandler()])
    assert os.environ["OMP_NUM_THREADS"] == "2" and os.environ["OPENBLAS_NUM_THREADS"] == "2"
    assert os.environ["MKL_NUM_THREADS"] == "5"
