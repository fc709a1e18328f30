rule train:
    """Target, reference and leave-one-out models: the GPU jobs of the workflow."""
    input:
        dataset=dataset_file,
        split="results/studies/{study}/split.npz",
    output:
        model="results/studies/{study}/models/{role}/{index}.pt",
        card="results/studies/{study}/models/{role}/{index}.json",
        signals="results/studies/{study}/signals/{role}/{index}.npy",
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
    benchmark:
        "results/benchmarks/{study}/train-{role}-{index}.tsv"
    log:
        "logs/{study}/train/{role}-{index}.log",
    conda:
        ENV
    script:
        "../scripts/train.py"
