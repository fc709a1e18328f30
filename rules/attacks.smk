rule score:
    """One attack instance on every target of a study: light CPU work on saved signals."""
    input:
        unpack(attack_inputs),
    output:
        scores="results/studies/{study}/scores/{attack}.parquet",
        metrics="results/studies/{study}/metrics/{attack}.parquet",
    params:
        attack=lambda wc: study_config(wc)["attacks"][wc.attack],
        nonmembers=lambda wc: study_config(wc)["nonmembers"],
        metrics=config["metrics"],
        # white-box attacks rebuild models, so they (only) rerun when the recipe changes
        whitebox=whitebox_params,
        code=attack_code,
    resources:
        mem_mb=8000,
        runtime=30,
    benchmark:
        "results/benchmarks/{study}/score-{attack}.tsv"
    log:
        "logs/{study}/score/{attack}.log",
    conda:
        ENV
    script:
        "../scripts/score.py"


rule fit:
    """Attack-side models (BMIA's Laplace posterior, ...): GPU-capable, cached per group."""
    input:
        unpack(fit_inputs),
    output:
        arrays="results/studies/{study}/fits/{fit}/{group}.npz",
        card="results/studies/{study}/fits/{fit}/{group}.json",
    params:
        fit=fit_settings,
        model=lambda wc: study_config(wc)["model"],
        recipe=lambda wc: study_config(wc)["training"],
        code=fit_code,
    threads: config["resources"]["train_threads"]
    resources:
        gpu=config["resources"]["train_gpus"],
        mem_mb=config["resources"]["train_mem_mb"],
        runtime=config["resources"]["train_runtime_min"],
        slurm_partition=config["resources"]["gpu_partition"],
    benchmark:
        "results/benchmarks/{study}/fit-{fit}-{group}.tsv"
    log:
        "logs/{study}/fit/{fit}-{group}.log",
    conda:
        ENV
    script:
        "../scripts/fit.py"
