from miarepro import logs
from miarepro.artifacts.builders import build

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)
params = sm.params.artifact
config = {key: params[key] for key in ("scale", "studies", "metrics", "artifacts")}
build(sm.wildcards.name, params["settings"], config, sm.output[0])
