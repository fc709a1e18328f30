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
        architecture=lambda wc: study_config(wc)["model"],
        recipe=lambda wc: study_config(wc)["training"],
        queries=lambda wc: study_config(wc)["queries"],
        code=code("miarepro.training", "miarepro.boosting"),
    threads: config["resources"]["train_threads"]
    resources:
        gpu=config["resources"]["train_gpus"],
        mem_mb=config["resources"]["train_mem_mb"],
        runtime=config["resources"]["train_runtime_min"],
        slurm_partition=config["resources"]["gpu_partition"],
    benchmark:
        "results/benchmarks/{study}/train-{role}-{index}.tsv"
    log:
        "logs/{study}/train/{role}-{index}.log",
    conda:
        ENV
    script:
        "../scripts/train.py"
