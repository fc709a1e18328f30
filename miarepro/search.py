"""Hyperparameter searches with optuna, written as plain config.

A search space is a mapping from hyperparameter name to a distribution, as QMIA's Tables 4 and 5
print them::

    lr: {low: 1.0e-6, high: 1.0e-2, log: true}      # loguniform
    epochs: {low: 5, high: 50, step: 5}              # integers when low and high are
    hidden_dims: {choices: [[], [512, 512]]}         # categorical

:func:`run` minimises an objective over it with optuna's TPE sampler (QMIA used Hyperopt, also
TPE) and, for objectives that report per-epoch losses, the asynchronous successive-halving
pruner (QMIA's AsyncHyperBand). A trial whose training diverges (an ``ArithmeticError``,
such as :class:`miarepro.boosting.Diverged`) or whose loss is not finite is pruned, as any
search over learning rates near 1 meets some. The sampler is seeded, so a search is
reproducible. The caller decides what the objective is scored on; QMIA's searches never see
evaluation samples.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Space = Mapping[str, Mapping[str, Any]]
#: ``objective(params, report) -> loss``. ``report(step, loss)`` gives the pruner an
#: intermediate validation loss; it raises ``optuna.TrialPruned`` to stop a hopeless trial.
Objective = Callable[[dict[str, Any], Callable[[int, float], None]], float]


class SpaceError(ValueError):
    """A search space entry is malformed; the message names the entry."""


def check_space(space: Any, where: str = "space") -> None:
    """Reject a malformed space, naming the entry (called by the config check)."""
    if not isinstance(space, Mapping) or not space:
        raise SpaceError(f"{where}: a search space maps hyperparameter names to distributions")
    for name, spec in space.items():
        at = f"{where}.{name}"
        if not isinstance(spec, Mapping):
            raise SpaceError(f"{at}: give {{low, high[, log, step]}} or {{choices: [...]}}")
        if "choices" in spec:
            if set(spec) != {"choices"} or not spec["choices"]:
                raise SpaceError(f"{at}: a categorical entry has only a non-empty 'choices'")
            continue
        unknown = set(spec) - {"low", "high", "log", "step"}
        if unknown or not {"low", "high"} <= set(spec):
            raise SpaceError(f"{at}: needs low and high (and optionally log, step); "
                             f"got {sorted(spec)}")
        if not spec["low"] < spec["high"] or (spec.get("log") and spec["low"] <= 0):
            raise SpaceError(f"{at}: needs 0 < low < high on a log scale, low < high otherwise")


def suggest(trial: Any, space: Space) -> dict[str, Any]:
    """One point of ``space`` drawn by an optuna trial."""
    params = {}
    for name, spec in space.items():
        if "choices" in spec:
            # optuna's categorical values must be scalars: draw an index, keep lists as lists
            index = trial.suggest_categorical(name, list(range(len(spec["choices"]))))
            params[name] = spec["choices"][index]
        elif isinstance(spec["low"], int) and isinstance(spec["high"], int):
            params[name] = trial.suggest_int(name, spec["low"], spec["high"],
                                             step=spec.get("step", 1), log=spec.get("log", False))
        else:
            params[name] = trial.suggest_float(name, float(spec["low"]), float(spec["high"]),
                                               log=spec.get("log", False))
    return params


def run(objective: Objective, space: Space, trials: int, seed: int) -> tuple[dict[str, Any],
                                                                          list[dict[str, Any]]]:
    """Minimise ``objective`` over ``space`` in ``trials`` trials.

    Returns the chosen values and the trial log (one record per trial: number, values, loss,
    state), which the caller saves beside its fit.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner())
    chosen: dict[int, dict[str, Any]] = {}

    def wrapped(trial: Any) -> float:
        params = suggest(trial, space)
        chosen[trial.number] = params

        def report(step: int, loss: float) -> None:
            trial.report(loss, step)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at step {step}")

        try:
            loss = float(objective(params, report))
        except ArithmeticError as error:  # its training diverged (boosting.Diverged): no model
            log.info("trial %d: diverged %s", trial.number, json.dumps(params))
            raise optuna.TrialPruned(f"diverged: {error}") from error
        if not math.isfinite(loss):
            raise optuna.TrialPruned(f"non-finite loss {loss}")
        log.info("trial %d: loss %.5g %s", trial.number, loss, json.dumps(params))
        return loss

    study.optimize(wrapped, n_trials=trials, catch=())
    trial_log = [{"number": t.number, "params": chosen.get(t.number), "loss": t.value,
                  "state": t.state.name} for t in study.trials]
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not finished:
        raise RuntimeError(f"none of the {trials} search trials finished")
    return chosen[study.best_trial.number], trial_log
