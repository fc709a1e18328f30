# miarepro: reproduce five membership-inference-attack papers on one shared pipeline.
# Default: `snakemake --profile profiles/local` (offline, CPU, miniature). Cluster:
# `snakemake --profile slurm --configfile config/papers/<paper>.yaml`.
import os
import sys

# The package is importable without being installed (a cluster's conda environment holds only
# its dependencies): from this directory here, and through PYTHONPATH in every job's scripts,
# in front of the caller's own (a module system's or a user's libraries, Snakemake's included)
sys.path.insert(0, workflow.basedir)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [workflow.basedir, *filter(None, [os.environ.get("PYTHONPATH")])])

from miarepro import config as miarepro_config  # noqa: E402
from miarepro import replanning  # noqa: E402
from miarepro import schema as miarepro_schema  # noqa: E402
from miarepro import warm  # noqa: E402

replanning.install()  # one pending re-planning timer, not one more per pass


if "studies" not in config and "include" not in config:  # a --configfile replaces the default

    configfile: os.path.join(workflow.basedir, "config", "config.yaml")



miarepro_schema.check_files(workflow.configfiles)  # a key given twice fails, naming its line
miarepro_config.validate(config)  # merges in the configs it includes (config/papers/all.yaml)


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/attacks.smk"
include: "rules/artifacts.smk"


if workflow.is_main_process:
    announce_absent_datasets()


onstart:
    before_first_job()
    if workflow.local_exec and config["resources"]["warm_worker"]:
        warm.start("logs")


onsuccess:
    warm.stop()


onerror:
    warm.stop()


rule all:
    input:
        artifact_outputs(),
        f"{RESULTS}/artifacts/index.md",
    default_target: True
