"""DP-SGD targets (``training.dp``): the budget is met, noise is applied, models load plainly,
runs are reproducible and a bad block fails naming its key."""

import re

import numpy as np
import pytest
import torch
from opacus.accountants import RDPAccountant

from miarepro import config as cfg
from miarepro import privacy
from miarepro.models import build_model
from miarepro.training import predict_logits, train_model

MLP = {"arch": "mlp", "widths": [32], "dropout": 0.2}
RECIPE = {"epochs": 3, "lr": 0.1, "batch_size": 20}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from more threads, and lose a lot when the cores are busy."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(n=200, d=20, classes=4, seed=0, flip=0.0):
    """Gaussian clusters (easily learnable); ``flip`` relabels that share at random."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d)) * 1.5
    y = rng.integers(0, classes, n)
    X = (centers[y] + rng.normal(size=(n, d))).astype(np.float32)
    noisy = rng.random(n) < flip
    return X, np.where(noisy, rng.integers(0, classes, n), y)


def _train(dp, arch=MLP, seed=0, recipe=RECIPE, data=None, n_train=100):
    X, y = data if data is not None else _data()
    return train_model(X, y, np.arange(n_train), arch, {**recipe, "dp": dp}, 4, seed,
                       eval_indices=np.arange(n_train, len(y)))


def _weights(model):
    return {key: value.clone() for key, value in model.state_dict().items()}


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_accountant_epsilon_of_the_recorded_noise_is_the_target(epsilon):
    info = _train({"epsilon": epsilon}).info
    accountant = RDPAccountant()
    accountant.history = [(info["dp_noise_multiplier"], info["dp_sample_rate"], info["dp_steps"])]
    spent = accountant.get_epsilon(info["dp_delta"])
    assert abs(spent - epsilon) / epsilon < 0.01
    assert spent <= epsilon
    assert info["dp_epsilon"] == pytest.approx(spent)  # the attached accountant saw every step
    assert info["dp_delta"] == pytest.approx(1 / (10 * 100))
    assert info["dp_sample_rate"] == pytest.approx(20 / 100)
    assert info["dp_steps"] == 3 * 5
    assert info["dp_max_grad_norm"] == 1.0


def test_a_smaller_epsilon_needs_more_noise():
    sigmas = [privacy.plan({"epsilon": e}, 100, 20, 3).noise_multiplier for e in (4, 0.5, 0.1)]
    assert sigmas[0] < sigmas[1] < sigmas[2]
    assert _train({"epsilon": 0.5}).info["dp_noise_multiplier"] > \
        _train({"epsilon": 4.0}).info["dp_noise_multiplier"]  # the runs of the first test


@pytest.mark.parametrize("arch, shape", [
    (MLP, (20,)),
    ({"arch": "lenet", "variant": "stolen_memories"}, (1, 28, 28)),
])
def test_saved_weights_load_into_the_plain_architecture(tmp_path, arch, shape):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(48, *shape)).astype(np.float32)
    y = rng.integers(0, 4, 48)
    trained = _train({"epsilon": 0.5, "max_grad_norm": 0.5}, arch,
                     recipe={"epochs": 1, "batch_size": 8}, data=(X, y), n_train=32)
    torch.save(trained.model.state_dict(), tmp_path / "model.pt")
    plain = build_model(arch, shape, 4).to(next(trained.model.parameters()).device)
    plain.load_state_dict(torch.load(tmp_path / "model.pt", weights_only=True))  # strict
    np.testing.assert_array_equal(predict_logits(plain, X), predict_logits(trained.model, X))
    assert not any(name.startswith("_module") for name in trained.model.state_dict())


def test_the_same_seed_gives_the_same_model():
    first, second = _train({"epsilon": 1.0}, seed=3), _train({"epsilon": 1.0}, seed=3)
    other = _train({"epsilon": 1.0}, seed=4)
    for key, value in _weights(first.model).items():
        torch.testing.assert_close(value, second.model.state_dict()[key], rtol=0, atol=0)
    assert any(not torch.equal(value, other.model.state_dict()[key])
               for key, value in _weights(first.model).items())


@pytest.mark.parametrize("dp, key", [
    ({"epsilon": 1.0, "delta": 0.01}, "training.dp.delta"),  # 1/N = 0.01 for N = 100
    ({"epsilon": 0}, "training.dp.epsilon"),
    ({"epsilon": -1.0}, "training.dp.epsilon"),
    ({"epsilon": 1.0, "noise": 1.0}, "training.dp.noise"),
    ({"epsilon": 1.0, "max_grad_norm": 0}, "training.dp.max_grad_norm"),
])
def test_a_bad_dp_block_fails_before_training_naming_the_key(dp, key):
    with pytest.raises(ValueError, match=re.escape(key)):
        _train(dp)


def test_batch_norm_is_refused():
    X = np.zeros((8, 3, 8, 8), np.float32)
    with pytest.raises(ValueError, match=r"training\.dp: architecture 'resnet'.*BatchNorm"):
        train_model(X, np.zeros(8, int), np.arange(8), {"arch": "resnet", "depth": 20},
                    {"epochs": 1, "batch_size": 4, "dp": {"epsilon": 1.0}}, 2, 0)


def _config(dp, arch=None):
    """A minimal valid config: 569 breast-cancer records, 142 per target and reference half."""
    return {"datasets": {"bc": {"source": "breast_cancer"}}, "artifacts": {}, "studies": {"sm": {
        "paper": "stolen-memories", "dataset": "bc", "model": arch or {"arch": "mlp"},
        "split": {"scheme": "partition", "seed": 0, "fractions": {
            "target_train": 0.25, "target_test": 0.25, "reference_pool": 0.5}},
        "training": {"epochs": 2, "dp": dp}, "attacks": {"loss": {"attack": "marginal"}}}}}


@pytest.mark.parametrize("dp, key", [
    ({"epsilon": 1.0, "delta": 1 / 142}, "training.dp.delta"),
    # the 285-record pool's odd-numbered references train on 143 records, not 142
    ({"epsilon": 1.0, "delta": 1 / 142.5}, "training.dp.delta"),
    ({"epsilon": 0}, "training.dp.epsilon"),
    ({"epsilon": 1.0, "noise_multiplier": 1.0}, "training.dp.noise_multiplier"),
    ({"delta": 1e-5}, "training.dp"),
])
def test_a_bad_dp_block_fails_at_config_load(dp, key):
    with pytest.raises(cfg.ConfigError, match=re.escape(f"config key studies.sm.{key}")):
        cfg.validate(_config(dp))


def test_config_accepts_a_good_block_and_refuses_dp_on_catboost():
    validated = cfg.validate(_config({"epsilon": 1.0, "delta": 1e-3, "max_grad_norm": 2.0}))
    assert validated["studies"]["sm"]["training"]["dp"]["epsilon"] == 1.0
    with pytest.raises(cfg.ConfigError, match=r"studies\.sm\.training\.dp: DP-SGD"):
        cfg.validate(_config({"epsilon": 1.0}, {"arch": "catboost"}))


def test_noise_is_applied_a_tiny_epsilon_stops_memorisation():
    data = _data(n=300, flip=0.3)
    arch, recipe = {"arch": "mlp", "widths": [128]}, {"epochs": 40, "lr": 0.1, "batch_size": 25}
    plain = train_model(*data, np.arange(100), arch, recipe, 4, 0,
                        eval_indices=np.arange(100, 300)).info
    private = _train({"epsilon": 0.1}, arch, recipe=recipe, data=data).info
    assert plain["train_accuracy"] > 0.95
    assert private["train_accuracy"] < plain["train_accuracy"] - 0.3
    assert (private["train_accuracy"] - private["test_accuracy"]
            < plain["train_accuracy"] - plain["test_accuracy"] - 0.2)
