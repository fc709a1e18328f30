from miarepro import logs, warm

sm = snakemake  # noqa: F821 - injected by Snakemake
uses_torch = sm.params.architecture["arch"] != "catboost"  # CatBoost never imports it (2 s)
if uses_torch:
    warm.delegate(sm, "torch")  # a local run's warm worker runs this job (torch imported), if any
logs.setup(sm)  # first here: it caps the threads numpy and torch start

from miarepro import pipeline  # noqa: E402

if uses_torch:
    from miarepro import compat

    compat.eager_optimizers()  # this process never compiles: skip torch.compile's 1.5 s import

if "tens" in sm.wildcards.keys():  # a bundle: models {tens}0 to {tens}9, or the first few
    prefix = sm.output[0][: -len("0.pt")]
    models = [(int(f"{sm.wildcards.tens}{k}"), f"{prefix}{k}.pt", f"{prefix}{k}.npy")
              for k in range(len(sm.output) // 3)]
else:
    models = [(int(sm.wildcards.index), sm.output.model, sm.output.signals)]
pipeline.train_several(
    sm.input.dataset, sm.input.split, sm.wildcards.role, models,
    sm.params.architecture, sm.params.recipe, sm.params.queries, threads=sm.threads,
    stacked=sm.params.get("stacked", False),
)
