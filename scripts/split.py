from miarepro import logs

logs.setup(snakemake)  # noqa: F821 - injected by Snakemake

from miarepro import pipeline  # noqa: E402

pipeline.make_split(snakemake.input[0], snakemake.params.spec, snakemake.output[0])  # noqa: F821
