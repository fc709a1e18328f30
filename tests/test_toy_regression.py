"""BMIA Figure 1's toy regression: the two models fit the sine, and the paper's claim holds.

The claim: quantile regression's 90% band stays narrow in the data-free centre, while a
Laplace BNN's band widens there. Both models are fitted once for the module.
"""

import warnings

import numpy as np
import pytest

from miarepro.artifacts import toy_regression

MODES = (-3.0, 3.0)


@pytest.fixture(scope="module")
def curves(tmp_path_factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # laplace-torch's backends warn about their internals
        return toy_regression.toy_regression_curves({"builder": "toy_regression"},
                                                    tmp_path_factory.mktemp("data"))


def test_quantile_band_covers_about_90_percent_of_training_points(curves):
    lower, _, upper = curves["quantile_regression"]["predict"](curves["x"]).T
    coverage = np.mean((curves["y"] >= lower) & (curves["y"] <= upper))
    assert 0.8 <= coverage <= 0.97, coverage


@pytest.mark.parametrize("model", ["quantile_regression", "bnn"])
def test_median_tracks_the_sine_at_the_modes(curves, model):
    median = np.interp(MODES, curves["grid"], curves[model]["median"])
    np.testing.assert_allclose(median, np.sin(1.2 * np.array(MODES)), atol=0.1)


def test_bnn_band_widens_in_the_gap_where_quantile_regression_does_not(curves):
    qr, bnn = curves["quantile_regression"]["widths"], curves["bnn"]["widths"]
    assert bnn[0.0] > 3 * max(bnn[-3.0], bnn[3.0]), bnn
    assert qr[0.0] < bnn[0.0] / 3, (qr, bnn)


def test_band_widths_interpolates_linearly():
    grid = np.array([0.0, 1.0, 2.0])
    lower, upper = grid, 3 * grid + 1  # width 2x + 1
    assert toy_regression.band_widths(grid, lower, upper, at=(0.5, 1.5, 2.0)) == \
        pytest.approx({0.5: 2.0, 1.5: 4.0, 2.0: 5.0})


def test_figure_is_written_and_rebuilds_identically(curves, tmp_path, monkeypatch):
    used = []

    def recorded(*args, **kwargs):
        used.append(toy_regression_curves(*args, **kwargs))
        return used[-1]

    toy_regression_curves = toy_regression.toy_regression_curves
    monkeypatch.setattr(toy_regression, "toy_regression_curves", recorded)
    prefix = str(tmp_path / "BMIA-F1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        toy_regression.toy_regression_figure("BMIA-F1", {"builder": "toy_regression"},
                                             {"data_dir": str(tmp_path)}, prefix)
    for suffix in (".png", ".pdf"):
        assert (tmp_path / f"BMIA-F1{suffix}").stat().st_size > 0
    for model in ("quantile_regression", "bnn"):
        assert used[0][model]["widths"] == curves[model]["widths"]
