rule table:
    input:
        artifact_inputs,
    output:
        csv=report("results/artifacts/{name}.csv", caption="../report/table.rst",
                   category=report_category, subcategory=report_subcategory,
                   labels=report_labels),
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
        png=report("results/artifacts/{name}.png", caption="../report/figure.rst",
                   category=report_category, subcategory=report_subcategory,
                   labels=report_labels),
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


use rule figure as figure_with_data with:
    output:
        png=report("results/artifacts/{name}.png", caption="../report/figure.rst",
                   category=report_category, subcategory=report_subcategory,
                   labels=report_labels),
        pdf="results/artifacts/{name}.pdf",
        csv="results/artifacts/{name}.csv",  # the numbers the figure draws
    wildcard_constraints:
        name=artifacts_of_kind("figure", data=True),


rule index:
    input:
        artifact_outputs(),
    output:
        report("results/artifacts/index.md", caption="../report/index.rst",
               category=artifact_report.ACROSS_PAPERS, subcategory="Index",
               labels={"artifact": "index", "title": "every artifact of the five papers"}),
        "results/artifacts/deviations.md",
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
