from miarepro import logs, pipeline

logs.setup(snakemake)  # noqa: F821 - injected by Snakemake
pipeline.make_dataset(snakemake.params.spec, snakemake.params.data_dir, snakemake.output.arrays)  # noqa: F821
