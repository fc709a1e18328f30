rule train:
    """Target, reference and leave-one-out models: the GPU jobs of the workflow."""
    input:
        dataset=dataset_file,
        split="results/studies/{study}/split.npz",
    output:
        # one prefix: Snakemake's between-workflow cache (--cache) keeps multi-file outputs
        # only as multiext
        multiext("results/studies/{study}/models/{role}/{index}", model=".pt", card=".json",
                 signals=".npy"),
    params:
        # Snakemake's between-workflow cache keys a job by its code, params and inputs, not its
        # wildcards: without this, every model of a study would be the first one cached
        identity="{role}/{index}",
        architecture=study_value("model"),
        recipe=study_value("training"),
        queries=study_value("queries"),
        code=code("miarepro.training", "miarepro.boosting"),
    threads: config["resources"]["train_threads"]
    resources:
        gpu=config["resources"]["train_gpus"],
        mem_mb=retry_memory,  # memory and time follow the study's model
        runtime=training_runtime,  # ten times the study's per-model time for train_tens
        slurm_partition=config["resources"]["gpu_partition"],
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
# per study would otherwise plan thousands of jobs.
use rule train as train_tens with:
    params:
        identity="{role}/{tens}x",
        # trained as one stack (the same weights): the cards' seconds are the stack's tenth
        stacked=trained_stacked,
    output:
        multiext("results/studies/{study}/models/{role}/{tens}",
                 *(f"{k}{ext}" for k in range(10) for ext in (".pt", ".json", ".npy"))),
    wildcard_constraints:
        study=trained_ten_per_job(bundled=True),
        tens=r"\d*",  # empty for models 0 to 9
    cache: True  # not inherited by `use rule`
    log:
        "logs/{study}/train/{role}-{tens}x.log",
