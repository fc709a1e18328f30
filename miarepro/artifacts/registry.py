"""The artifact builders by name, with what each reads: what validating a config needs to
know of them, without importing them (they import pandas, matplotlib, the results), so the
config sits below the builders and no module imports upward. Each ``build`` (and ``inputs``)
is imported when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SUFFIXES = {"table": (".csv", ".md"), "figure": (".png", ".pdf")}
#: The papers' compute column (BMIA-T1's "Time"): ours is the minutes of training the models an
#: attack uses plus its fit and scoring, on whatever device ran them (the table says so).
COMPUTE = "gpu_minutes"
#: The attack's own scoring time per target (a sweep's y axis; BMIA Figure 3c's cost).
SECONDS = "seconds"
#: Subpop Table 3's cost: training minutes with every target known, at the paper's counts.
TRAIN_MINUTES = "train_minutes"
#: IHA §4.5.1's cost: minutes of an audit of a thousand records, at the paper's reference count
AUDIT_MINUTES = "audit_minutes"
#: the costs a claim can compare (measured once; their interval is the run's timing noise)
COSTS = (COMPUTE, TRAIN_MINUTES, AUDIT_MINUTES, SECONDS)


@dataclass(frozen=True)
class Builder:
    kind: str
    build: Callable[[str, dict[str, Any], dict[str, Any], str], None]
    description: str
    keys: tuple[str, ...] = ("studies",)  # the settings it reads besides ``builder``
    #: the files it reads, if not the attacks' scores and metrics (:func:`inputs`)
    inputs: Callable[[str, dict[str, Any], dict[str, Any]], list[str]] | None = None
    required: tuple[str, ...] = ()  # the settings it cannot do without
    #: its ``attacks`` need only be in some of its studies (a grid's rows, a fit table's
    #: studies); otherwise every listed study must have every listed attack
    attacks_in_some_study: bool = False
    #: it shows where each study's target sits (the regime section): it reads the targets'
    #: cards and the regime's baseline
    regime: bool = False
    #: it reads every replicate of its studies (the claims); the others show the first
    replicates: bool = False
    #: it reads the attacks' per-record scores (ROC curves, decision agreement), not only
    #: their metrics
    scores: bool = False
    #: a figure that also writes the numbers it draws as a CSV beside it
    data: bool = False

    @property
    def reads_studies(self) -> bool:
        """Whether it reads studies (its inputs and reruns follow their config)."""
        return "studies" in self.keys

    def outputs(self, results: str, name: str, config: dict[str, Any]) -> list[str]:
        suffixes = SUFFIXES[self.kind] + ((".csv",) if self.data else ())
        return [f"{results}/artifacts/{name}{suffix}" for suffix in suffixes]


def _lazy(module: str, function: str) -> Callable[..., Any]:
    """``miarepro.artifacts.<module>.<function>``, imported when called: planning the workflow
    and validating a config should not pay for pandas, matplotlib, seaborn or torch."""

    def call(*args: Any) -> Any:
        import importlib

        return getattr(importlib.import_module(f"miarepro.artifacts.{module}"), function)(*args)

    call.__name__ = function
    call.__module__ = f"miarepro.artifacts.{module}"  # the code it runs (miarepro.provenance)
    return call


BUILDERS: dict[str, Builder] = {
    "leaderboard": Builder("table", _lazy("builders", "leaderboard"), "cross-paper leaderboard",
                           ("studies", "fprs"), regime=True),
    "claims": Builder("table", _lazy("claims", "build"),
                      "the papers' claims and their verdicts", inputs=_lazy("claims", "inputs"),
                      replicates=True),
    "paper_table": Builder("table", _lazy("builders", "paper_table"),
                           "a paper's table, ours beside theirs",
                           ("studies", "metrics", "attacks", "default_setting",
                            "paper_dataset"),
                           required=("metrics",), attacks_in_some_study=True, regime=True),
    # ``paper_dataset``: the paper's dataset of a figure drawn on a stand-in for another
    "roc": Builder("figure", _lazy("figures", "roc_figure"), "log-log ROC curves",
                   ("studies", "attacks", "title", "paper_dataset"), scores=True),
    "sweep": Builder("figure", _lazy("figures", "sweep_figure"),
                     "a metric against one attack parameter",
                     ("studies", "attacks", "x", "series", "metrics", "title", "paper_dataset"),
                     required=("studies", "attacks", "x", "metrics")),
    "grid": Builder("figure", _lazy("figures", "grid_figure"),
                    "a metric for every target x reference model pair",
                    ("studies", "attacks", "metrics", "title"),
                    required=("studies", "attacks", "metrics"), attacks_in_some_study=True),
    "bars": Builder("figure", _lazy("figures", "bars_figure"),
                    "a metric per study and attack, as grouped bars with intervals",
                    ("studies", "attacks", "metrics", "title", "bounds", "bound_studies"),
                    required=("studies", "attacks", "metrics"), attacks_in_some_study=True),
    "two_gaussians": Builder("figure", _lazy("sm_figures", "two_gaussians"),
                             "Stolen Memories' two Gaussians, from the generated data",
                             ("studies", "title"), inputs=_lazy("sm_figures",
                                                                "two_gaussians_inputs")),
    "displacement_sweep": Builder("figure", _lazy("sm_figures", "displacement_sweep"),
                                  "general-wb's validation vs test accuracy over its sweep",
                                  ("studies", "attacks", "title"),
                                  inputs=_lazy("sm_figures", "sweep_inputs"),
                                  required=("studies", "attacks"), data=True),
    "dp_utility": Builder("figure", _lazy("sm_figures", "dp_utility"),
                          "target train / test accuracy against the DP epsilon spent",
                          ("studies", "title"), inputs=_lazy("model_tables", "accuracy_inputs"),
                          data=True),
    "dataset_size_trend": Builder("figure", _lazy("sm_figures", "dataset_size_trend"),
                                  "one metric of each attack against the dataset's size",
                                  ("studies", "attacks", "metrics", "title"),
                                  inputs=_lazy("sm_figures", "size_inputs"),
                                  required=("studies", "attacks", "metrics"),
                                  attacks_in_some_study=True, data=True),
    "influence_explanations": Builder("figure", _lazy("sm_figures", "influence_explanations"),
                                      "training images and influence-directed explanations",
                                      ("studies", "paper_dataset", "title"),
                                      inputs=_lazy("sm_figures", "explanation_inputs")),
    "density": Builder("figure", _lazy("density", "density_figure"),
                       "one hard non-member's score densities and thresholds per attack",
                       ("studies", "attacks", "title"), inputs=_lazy("density", "inputs"),
                       required=("studies", "attacks")),
    "toy_regression": Builder("figure", _lazy("toy_regression", "toy_regression_figure"),
                              "BMIA's toy regression: "
                              "quantile regression vs a Laplace BNN",
                              ("n_samples", "seed", "title", "deviations"),
                              inputs=lambda *_: []),
    "accuracy_table": Builder("table", _lazy("model_tables", "accuracy_table"),
                              "target accuracies beside the paper's (QMIA Table 3)",
                              inputs=_lazy("model_tables", "accuracy_inputs"), regime=True),
    "search_table": Builder("table", _lazy("model_tables", "search_table"),
                            "hyperparameter search spaces and chosen values (QMIA Tables 4, 5)",
                            ("studies", "attacks"), inputs=_lazy("model_tables", "fit_inputs"),
                            required=("studies", "attacks"), attacks_in_some_study=True,
                            regime=True),
    "fit_costs": Builder("table", _lazy("model_tables", "fit_costs"),
                         "fit seconds with and without a search against one reference model",
                         ("studies", "attacks"), inputs=_lazy("model_tables", "fit_inputs"),
                         required=("studies", "attacks"), attacks_in_some_study=True,
                         regime=True),
    "training_costs": Builder("table", _lazy("subpop_artifacts", "training_costs"),
                              "training minutes, all targets known vs per new sample (Subpop "
                              "Table 3)", ("studies", "default_setting"),
                              inputs=_lazy("subpop_artifacts", "cost_inputs"), regime=True),
    "subpopulation_examples": Builder(
        "figure", _lazy("subpop_artifacts", "subpopulation_examples"),
        "records beside their crafted subpopulations, and the class kept per noise scale",
        ("studies", "attacks", "betas", "title"), inputs=_lazy("subpop_artifacts",
                                                               "example_inputs"),
        required=("studies", "attacks")),
    "threat_models": Builder("table", _lazy("iha_tables", "threat_models"),
                             "what each attack reads, beside IHA Table 1", (),
                             inputs=lambda *_: []),
    "agreement": Builder("table", _lazy("iha_tables", "agreement"),
                         "pairwise decision agreement at one FPR (IHA Table 5)",
                         ("studies", "attacks", "fpr", "paper_dataset"),
                         required=("studies", "attacks", "fpr"), scores=True),
    "attack_costs": Builder("table", _lazy("iha_tables", "attack_costs"),
                            "precompute and per-record seconds and memory (IHA Table 6)",
                            ("studies", "attacks", "paper_dataset"),
                            inputs=_lazy("iha_tables", "cost_inputs"),
                            required=("studies", "attacks"), regime=True),
}
