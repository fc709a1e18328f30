rule score:
    """One attack instance on every target of a study: light CPU work on saved signals."""
    input:
        unpack(attack_inputs),
    output:
        scores="results/studies/{study}/scores/{attack}.parquet",
        metrics="results/studies/{study}/metrics/{attack}.parquet",
    params:
        attack=scored_attack,
        nonmembers=study_value("nonmembers"),
        metrics=config["metrics"],
        # white-box attacks rebuild models, so they (only) rerun when the recipe changes
        whitebox=whitebox_params,
        code=attack_code,
    resources:
        mem_mb=score_memory,  # memory and time: more on each retry
        runtime=score_runtime,
    wildcard_constraints:
        study=scored_on_models(False),
    benchmark:
        "results/benchmarks/{study}/score-{attack}.tsv"
    log:
        "logs/{study}/score/{attack}.log",
    conda:
        ENV
    script:
        "../scripts/score.py"


# Attacks that run the models score where the fits run: on a GPU node, with the study's memory
# and fit time. At the papers' scale IHA's conjugate gradients over 10,000 records of the
# Purchase MLP-2 take 2 hours of one CPU core (0.71 s a record) against 8 to 12 minutes of an
# H100 (benchmarks/iha.py); Subpop and MERLIN run the victim on 30 crafted or noisy copies of
# every audited record. Locally nothing changes (no GPU, one thread).
use rule score as score_models with:
    resources:
        gpu=job_gpus,
        mem_mb=retry_memory,
        runtime=fit_runtime,
        slurm_partition=job_partition,
    wildcard_constraints:
        study=scored_on_models(True),


rule fit:
    """Attack-side models (BMIA's Laplace posterior, ...): GPU-capable, cached per group."""
    input:
        unpack(fit_inputs),
    output:
        multiext("results/studies/{study}/fits/{fit}/{group}", arrays=".npz", card=".json"),
    params:
        group="{group}",  # the cache key (see rule train)
        fit=fit_settings,
        model=study_value("model"),
        recipe=study_value("training"),
        code=fit_code,
    threads: config["resources"]["train_threads"]
    resources:
        gpu=job_gpus,
        mem_mb=retry_memory,  # memory and time follow the study's model
        runtime=fit_runtime,
        slurm_partition=job_partition,
    cache: True
    log:
        "logs/{study}/fit/{fit}-{group}.log",
    conda:
        ENV
    script:
        "../scripts/fit.py"
