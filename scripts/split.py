from miarepro import logs, pipeline

logs.setup(snakemake)  # noqa: F821 - injected by Snakemake
pipeline.make_split(snakemake.input[0], snakemake.params.spec, snakemake.output[0])  # noqa: F821
