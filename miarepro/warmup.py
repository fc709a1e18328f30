"""Import every module a workflow job imports, so that Python caches their bytecode.

``setup.sh`` runs this once per environment with bytecode writing allowed; afterwards jobs
start without recompiling torch, pandas or scipy, even where ``PYTHONDONTWRITEBYTECODE`` is
set. Modules that a job imports only inside a function are listed here explicitly.
"""

from __future__ import annotations

import importlib

MODULES = (
    "torch", "torch._dynamo", "torch.optim", "torch.func", "pandas", "pyarrow.parquet",
    "scipy.stats", "scipy.optimize", "scipy.special", "sklearn.datasets", "sklearn.metrics",
    "sklearn.cluster", "sklearn.linear_model", "matplotlib.pyplot", "seaborn", "jsonschema",
    "yaml", "snakemake", "snakemake.script", "snakemake.cli", "snakemake.api", "snakemake.dag",
    "snakemake.workflow", "snakemake.jobs", "mlxtend.data", "PIL.Image", "catboost", "optuna",
    "sklearn.model_selection",
    "miarepro.pipeline", "miarepro.attacks", "miarepro.artifacts.builders",
    "miarepro.artifacts.claims", "miarepro.artifacts.density", "miarepro.artifacts.figures",
    "miarepro.artifacts.index", "miarepro.artifacts.toy_regression", "miarepro.training",
    "miarepro.lastlayer", "miarepro.quantile", "miarepro.data", "miarepro.boosting",
    "miarepro.search", "miarepro.artifacts.model_tables", "miarepro.artifacts.iha_tables",
    "miarepro.artifacts.sm_figures", "miarepro.ensemble", "miarepro.influence",
    "miarepro.privacy", "miarepro.hessian", "opacus",
)


def main() -> None:
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()  # torchvision and laplace need the operator shim on CPU-only torch
    for name in ("torchvision", "laplace", *MODULES):
        try:
            importlib.import_module(name)
        except ImportError as error:  # an optional module: nothing to cache
            print(f"warmup: skipped {name} ({error})")


if __name__ == "__main__":
    main()
