from miarepro import logs, warm

sm = snakemake  # noqa: F821 - injected by Snakemake
warm.delegate(sm, "scores")  # a local run's warm worker runs this job (pandas imported), if any
logs.setup(sm)  # first here: it caps the threads numpy and torch start

from miarepro import pipeline  # noqa: E402

study = None
if sm.params.whitebox:
    study = pipeline.StudyFiles(sm.input.dataset, sm.input.split, sm.params.whitebox["models"],
                                sm.params.whitebox["model"], sm.params.whitebox["training"])
costs = pipeline.score(
    sm.params.attack, sm.input.dataset, sm.input.split, list(sm.input.targets),
    list(sm.input.references), list(sm.input.loo), sm.output.scores, study=study,
    fit_paths=list(sm.input.fits), nonmembers=sm.params.nonmembers,
    fprs=sm.params.metrics["fprs"], calibration=sm.params.metrics["calibration"],
    alphas=sm.params.metrics["alphas"],
)
pipeline.measure(sm.output.scores, sm.params.metrics, sm.input.split, sm.output.metrics,
                 costs)
