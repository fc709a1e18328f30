# miarepro: reproduce five membership-inference-attack papers on one shared pipeline.
# Default: `snakemake --profile profiles/default` (offline, CPU, miniature). Cluster:
# `snakemake --profile slurm --configfile config/papers/<paper>.yaml`.
from miarepro import config as miarepro_config


if not config:  # a --configfile replaces the default instead of being merged into it

    configfile: "config/config.yaml"



miarepro_config.validate(config)


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/attacks.smk"
include: "rules/artifacts.smk"


rule all:
    input:
        artifact_outputs(),
        f"{RESULTS}/artifacts/index.md",
    default_target: True
