# Dataset jobs run where Snakemake runs (on a cluster: the submit host), as the compute nodes
# often have no internet for a `download: true` spec; they only read and convert files.
localrules:
    dataset,


rule dataset:
    output:
        arrays="results/datasets/{dataset}.npz",
        card="results/datasets/{dataset}.json",
    params:
        spec=lambda wc: config["datasets"][wc.dataset],
        data_dir=dataset_root,
        code=dataset_code,
    log:
        "logs/dataset/{dataset}.log",
    conda:
        ENV
    script:
        "../scripts/dataset.py"


rule split:
    input:
        dataset_file,
    output:
        "results/studies/{study}/split.npz",
    params:
        spec=study_value("split"),
        code=code("make_split", "miarepro.splits"),
    log:
        "logs/{study}/split.log",
    conda:
        ENV
    script:
        "../scripts/split.py"
