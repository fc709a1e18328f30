import os
import sys
from pathlib import Path

import pytest

# test helpers (tests/overfit.py) are imported as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))

# the longest files, which pyproject's two workers (-n 2 --dist loadfile: a file per worker at a
# time, in collection order) start first, so that neither worker is left with one at the end
LONGEST_FIRST = ("test_workflow.py", "test_workflow_runs.py", "test_paper_configs.py")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # the workers share the cores: one thread each, for them and the jobs they start, as two
    # busy threads per core make OpenMP's spinning waits take most of the time
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file keeps its own order
