from miarepro import logs
from miarepro.artifacts.index import write_index

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)
config = {"artifacts": sm.params.artifacts, "studies": sm.params.studies, "scale": sm.params.scale}
write_index(config, sm.output[0])
