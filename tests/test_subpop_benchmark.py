"""The Subpop benchmark's conditional AUC: what it says a score adds to another."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
import subpop  # benchmarks/subpop.py, found through the path above


def test_auc_given_pools_pairs_within_strata_by_hand():
    """Two strata of the given score with 2 and 4 member / non-member pairs: the pooled AUC
    weighs each stratum's AUC by its pairs (a plain mean of the strata would read 0.625)."""
    scores = pd.DataFrame({
        "given":  [1, 2, 3, 4, 5, 6, 7, 8],
        "member": [1, 0, 0, 0, 1, 1, 0, 0],
        "score":  [0.9, 0.1, 0.5, 0.6, 0.2, 0.8, 0.3, 0.9],
    })
    # low stratum (given 1-4): member 0.9 against 0.1, 0.5, 0.6: AUC 1 over 3 pairs;
    # high stratum (5-8): members 0.2, 0.8 against 0.3, 0.9: AUC 1/4 over 4 pairs
    assert subpop.auc_given(scores, "given", "score", bins=2) == (3 * 1 + 4 * 0.25) / 7


def test_auc_given_is_nan_where_no_stratum_holds_both_kinds():
    scores = pd.DataFrame({"given": [1, 2, 3, 4], "member": [1, 1, 0, 0],
                           "score": [0.1, 0.2, 0.3, 0.4]})
    assert np.isnan(subpop.auc_given(scores, "given", "score", bins=2))


def test_a_score_that_only_repeats_the_given_one_adds_nothing_and_a_new_signal_shows():
    """Within tenths of the own loss, its rest still separates a little: a score that echoes
    it reads the same, one with a signal of its own reads more."""
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 20_000)
    own = member + rng.normal(size=member.size)  # the own loss's signal
    scores = pd.DataFrame({"member": member, "own": own,
                           "echo": own + 0.01 * rng.normal(size=member.size),
                           "new": member + rng.normal(size=member.size)})
    rest = subpop.auc_given(scores, "own", "own")  # what the own loss still tells in a tenth
    assert 0.52 < rest < 0.56
    assert abs(subpop.auc_given(scores, "own", "echo") - rest) < 0.01
    assert subpop.auc_given(scores, "own", "new") > rest + 0.1
