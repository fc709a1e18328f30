from miarepro import logs

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)  # first: it caps the threads numpy and torch start

from miarepro.artifacts.builders import build  # noqa: E402

params = sm.params.artifact
config = {key: params[key] for key in ("scale", "studies", "metrics", "artifacts")}
build(sm.wildcards.name, params["settings"], config, sm.output[0])
