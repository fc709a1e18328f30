from miarepro import logs, warm

sm = snakemake  # noqa: F821 - injected by Snakemake
warm.delegate(sm, "artifacts")  # a local run's warm worker runs this job (matplotlib imported)
logs.setup(sm)  # first here: it caps the threads numpy and torch start

from miarepro.artifacts.index import write_index  # noqa: E402

config = {"artifacts": sm.params.artifacts, "studies": sm.params.studies, "scale": sm.params.scale}
write_index(config, sm.output[0], sm.output[1])
