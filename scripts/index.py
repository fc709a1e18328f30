from miarepro import logs

sm = snakemake  # noqa: F821 - injected by Snakemake
logs.setup(sm)  # first: it caps the threads numpy and torch start

from miarepro.artifacts.index import write_index  # noqa: E402

config = {"artifacts": sm.params.artifacts, "studies": sm.params.studies, "scale": sm.params.scale}
write_index(config, sm.output[0], sm.output[1])
