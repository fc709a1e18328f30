from miarepro import logs, pipeline

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)
pipeline.train(
    sm.input.dataset, sm.input.split, sm.wildcards.role, int(sm.wildcards.index),
    sm.params.architecture, sm.params.recipe, sm.params.queries,
    model_path=sm.output.model, signals_path=sm.output.signals, threads=sm.threads,
)
