from miarepro import logs, pipeline

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)
pipeline.score(
    sm.params.attack, sm.input.dataset, sm.input.split, list(sm.input.targets),
    list(sm.input.references), list(sm.input.loo), sm.output[0],
)
