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
        architecture=study_value("model"),
        recipe=study_value("training"),
        queries=study_value("queries"),
        code=code("miarepro.training", "miarepro.boosting"),
    threads: config["resources"]["train_threads"]
    resources:
        gpu=config["resources"]["train_gpus"],
        mem_mb=retry_memory,  # memory and time follow the study's model
        runtime=study_runtime,
        slurm_partition=config["resources"]["gpu_partition"],
    cache: True
    log:
        "logs/{study}/train/{role}-{index}.log",
    conda:
        ENV
    script:
        "../scripts/train.py"
