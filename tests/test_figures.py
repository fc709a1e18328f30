"""Figures drawn from estimates: what a reader sees where the audit cannot resolve a metric."""

import numpy as np

from miarepro.artifacts import figures
from miarepro.artifacts import results as res
from miarepro.uncertainty import Estimate


def test_bars_write_nr_where_a_metric_is_not_resolvable(monkeypatch):
    """Stolen Memories' Figure 11 at alpha 0.99 on a small study: no bar, which would read as
    zero, but "n/r" in its slot; every study keeps its slot on the axis."""
    def estimates(_results, study, _attack):
        return {"precision@cal99": Estimate(0.6, np.array([0.55, 0.6, 0.65]), "targets",
                                            resolvable=study == "large")}

    drawn = {}
    monkeypatch.setattr(res, "attack_estimates", estimates)
    monkeypatch.setattr(figures, "_save", lambda figure, prefix: drawn.update(figure=figure))
    attacks = {"bayes-wb": {"attack": "bayes_wb"}, "general-wb": {"attack": "general_wb"}}
    config = {"studies": {name: {"attacks": attacks} for name in ("small", "large")}}
    figures.bars_figure("F", {"studies": ["small", "large"], "attacks": list(attacks),
                              "metrics": ["precision@cal99"]}, config, "unused")
    (axis,) = drawn["figure"].axes
    assert [text.get_text() for text in axis.texts] == ["n/r", "n/r"]
    assert all(text.get_position()[0] < 0.5 for text in axis.texts)  # the small study's slot
    heights = sorted(round(patch.get_height(), 6) for patch in axis.patches)
    assert heights == [60.0, 60.0]
    assert axis.get_xlim() == (-0.5, 1.5)


def test_a_bound_is_drawn_over_the_groups_it_holds_for(monkeypatch):
    """Stolen Memories' Figure 12: Yeom et al.'s accuracy bound holds at epsilon 0.25 alone,
    so its dashed line spans that study's group, not the plain or epsilon-16 targets'."""
    monkeypatch.setattr(res, "attack_estimates", lambda *_: {
        "accuracy": Estimate(0.6, np.array([0.55, 0.6, 0.65]), "targets")})
    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda figure, prefix: drawn.update(figure=figure))
    studies = ["plain", "eps-16", "eps-0-25"]
    config = {"studies": {name: {"attacks": {"general-wb": {"attack": "general_wb"}}}
                          for name in studies}}
    figures.bars_figure("F", {"studies": studies, "attacks": ["general-wb"],
                              "metrics": ["accuracy"], "bounds": {"accuracy": 64.2},
                              "bound_studies": ["eps-0-25"]}, config, "unused")
    (axis,) = drawn["figure"].axes
    (line,) = axis.collections[-1].get_segments()
    np.testing.assert_allclose(line, [[1.55, 64.2], [2.45, 64.2]])


def test_grid_writes_nr_in_a_cell_the_audit_cannot_resolve(monkeypatch):
    """BMIA's Figure 4: a run pair whose metric is not resolvable reads "n/r" in its cell
    (seaborn leaves a missing value blank), and the best-reference frame skips it."""
    def estimates(_results, study, attack):
        return {"tpr@0.001": Estimate(0.05, np.array([0.04, 0.05, 0.06]), "targets",
                                      resolvable=(study, attack) != ("wide", "cross"))}

    drawn = {}
    monkeypatch.setattr(res, "attack_estimates", estimates)
    monkeypatch.setattr(figures, "_save", lambda figure, prefix: drawn.update(figure=figure))
    models = {"mlp": {"arch": "mlp", "widths": [8]}, "wide": {"arch": "mlp", "widths": [64]}}
    config = {"studies": {
        name: {"model": model, "attacks": {
            "own": {"attack": "bmia"},
            "cross": {"attack": "bmia", "reference_study": "wide" if name == "mlp" else "mlp"}}}
        for name, model in models.items()}}
    figures.grid_figure("F", {"studies": ["mlp", "wide"], "attacks": ["own", "cross"],
                              "metrics": ["tpr@0.001"]}, config, "unused")
    axis = drawn["figure"].axes[0]
    cells = {(round(t.get_position()[0], 1), round(t.get_position()[1], 1)): t.get_text()
             for t in axis.texts}
    assert cells[(0.5, 1.5)] == "n/r"  # row "wide", column "mlp": the unresolvable cross pair
    assert sum(text == "n/r" for text in cells.values()) == 1
    assert len(cells) == 4
