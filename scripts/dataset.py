from miarepro import logs

logs.setup(snakemake)  # noqa: F821 - injected by Snakemake

from miarepro import pipeline  # noqa: E402

pipeline.make_dataset(snakemake.params.spec, snakemake.params.data_dir, snakemake.output.arrays)  # noqa: F821
