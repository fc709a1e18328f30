from miarepro import logs, warm

sm = snakemake  # noqa: F821 - injected by Snakemake
warm.delegate(sm, "torch")  # a local run's warm worker runs this job (torch imported), if any
logs.setup(sm)  # first here: it caps the threads numpy and torch start

from miarepro import compat, pipeline  # noqa: E402

compat.eager_optimizers()  # this process never compiles: skip torch.compile's 1.5 s import

study = pipeline.StudyFiles(sm.input.dataset, sm.input.split,
                            f"results/studies/{sm.wildcards.study}/models", sm.params.model,
                            sm.params.recipe)
pipeline.fit(sm.params.fit, study, int(sm.wildcards.group), sm.output.arrays, sm.output.card,
             threads=sm.threads)
