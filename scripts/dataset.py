from miarepro import logs

logs.setup(snakemake)  # noqa: F821 - injected by Snakemake

from miarepro import pipeline  # noqa: E402

sm = snakemake  # noqa: F821 - injected by Snakemake
# a shipped or generated dataset gets no data_dir (it reads nothing there)
pipeline.make_dataset(sm.params.spec, sm.params.data_dir or ".", sm.output.arrays)
