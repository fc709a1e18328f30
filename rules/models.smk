# what a training job reads and is keyed by, and asks of a cluster: one model or a bundle
TRAIN_INPUT = {"dataset": dataset_file, "split": "results/studies/{study}/split.npz"}
TRAIN_PARAMS = {"architecture": study_value("model"), "recipe": study_value("training"),
                "queries": study_value("queries"),
                "code": code("train_several", "miarepro.training", "miarepro.boosting")}
TRAIN_RESOURCES = {"gpu": job_gpus,
                   "mem_mb": retry_memory,  # memory and time follow the study's model
                   "runtime": training_runtime,  # times the models of a bundle
                   "slurm_partition": job_partition}


rule train:
    """Target, reference and leave-one-out models: the GPU jobs of the workflow."""
    input:
        **TRAIN_INPUT,
    output:
        # one prefix: Snakemake's between-workflow cache (--cache) keeps multi-file outputs
        # only as multiext
        multiext("results/studies/{study}/models/{role}/{index}", model=".pt", card=".json",
                 signals=".npy"),
    params:
        # Snakemake's between-workflow cache keys a job by its code, params and inputs, not its
        # wildcards: without this, every model of a study would be the first one cached
        identity="{role}/{index}",
        **TRAIN_PARAMS,
    threads: config["resources"]["train_threads"]
    resources:
        **TRAIN_RESOURCES,
    cache: True
    wildcard_constraints:
        study=trained_ten_per_job(bundled=False),
    log:
        "logs/{study}/train/{role}-{index}.log",
    conda:
        ENV
    script:
        "../scripts/train.py"


# A study's `ten_per_job` roles: models {tens}0 to {tens}9 of a role in one job, the same files
# (and the same models) as ten `train` jobs. Paper configs with a hundred small shadow models
# per study would otherwise plan thousands of jobs. A group of ten the run reads only in part
# (a repetition's 8 reference models) trains just those: rule train_tens_<k>, models {tens}0
# to {tens}<k-1> (`bundle_sizes`).
for size in sorted({10, *bundle_sizes().values()}):

    rule:
        name:
            "train_tens" if size == 10 else f"train_tens_{size}"
        input:
            **TRAIN_INPUT,
        output:
            multiext("results/studies/{study}/models/{role}/{tens}",
                     *(f"{k}{ext}" for k in range(size) for ext in (".pt", ".json", ".npy"))),
        params:
            # the cache key: the group's first models are the same whatever the bundle's size
            identity="{role}/{tens}x",
            **TRAIN_PARAMS,
            # trained as one stack (the same weights): the cards' seconds are the stack's share
            stacked=trained_stacked,
        threads: config["resources"]["train_threads"]
        resources:
            **TRAIN_RESOURCES,
        cache: True
        wildcard_constraints:
            study=bundle_pattern(size),
            tens=r"\d*",  # empty for models 0 to 9
        log:
            "logs/{study}/train/{role}-{tens}x.log",
        conda:
            ENV
        script:
            "../scripts/train.py"
