from miarepro import logs, warm

sm = snakemake  # noqa: F821 - injected by Snakemake
warm.delegate(sm, "artifacts")  # a local run's warm worker runs this job (matplotlib imported)
logs.setup(sm)  # first here: it caps the threads numpy and torch start

from miarepro.artifacts.builders import build  # noqa: E402

params = sm.params.artifact
config = {key: params[key] for key in ("scale", "studies", "metrics", "artifacts")}
build(sm.wildcards.name, params["settings"], config, sm.output[0])
