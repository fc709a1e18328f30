rule score:
    """One attack instance on every target of a study: light CPU work on saved signals."""
    input:
        unpack(attack_inputs),
    output:
        scores="results/studies/{study}/scores/{attack}.parquet",
        metrics="results/studies/{study}/metrics/{attack}.parquet",
    params:
        attack=lambda wc: study_config(wc)["attacks"][wc.attack],
        metrics=config["metrics"],
        # white-box attacks rebuild models, so they (only) rerun when the recipe changes
        whitebox=whitebox_params,
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
