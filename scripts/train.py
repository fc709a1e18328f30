from miarepro import logs

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)  # first: it caps the threads numpy and torch start

from miarepro import compat, pipeline  # noqa: E402

compat.eager_optimizers()  # this process never compiles: skip torch.compile's 1.5 s import

pipeline.train(
    sm.input.dataset, sm.input.split, sm.wildcards.role, int(sm.wildcards.index),
    sm.params.architecture, sm.params.recipe, sm.params.queries,
    model_path=sm.output.model, signals_path=sm.output.signals, threads=sm.threads,
)
