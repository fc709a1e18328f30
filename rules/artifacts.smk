rule table:
    input:
        artifact_inputs,
    output:
        csv=report("results/artifacts/{name}.csv", category="Tables",
                   caption="../report/table.rst"),
        md="results/artifacts/{name}.md",
    wildcard_constraints:
        name=artifacts_of_kind("table"),
    params:
        artifact=artifact_params,
        code=artifact_code,
    log:
        "logs/artifacts/{name}.log",
    conda:
        ENV
    script:
        "../scripts/artifact.py"


rule figure:
    input:
        artifact_inputs,
    output:
        png=report("results/artifacts/{name}.png", category="Figures",
                   caption="../report/figure.rst"),
        pdf="results/artifacts/{name}.pdf",
    wildcard_constraints:
        name=artifacts_of_kind("figure"),
    params:
        artifact=artifact_params,
        code=artifact_code,
    log:
        "logs/artifacts/{name}.log",
    conda:
        ENV
    script:
        "../scripts/artifact.py"


rule index:
    input:
        artifact_outputs(),
    output:
        report("results/artifacts/index.md", category="Index", caption="../report/index.rst"),
    params:
        artifacts=config["artifacts"],
        studies=config["studies"],
        scale=config["scale"],
        code=provenance.digest(("miarepro.artifacts.index",)),
    log:
        "logs/artifacts/index.log",
    conda:
        ENV
    script:
        "../scripts/index.py"
