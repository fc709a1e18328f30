import os

import numpy as np
import pytest
import torch

from miarepro.models import build_model
from miarepro.training import _augment, device, predict_logits, train_model, train_stacked


def _data(n=400, d=20, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, d))
    y = rng.integers(0, classes, n)
    return (centers[y] + rng.normal(size=(n, d))).astype(np.float32), y


def test_training_is_deterministic_and_learns():
    X, y = _data()
    recipe = {"epochs": 15, "lr": 0.05, "batch_size": 32, "milestones": [0.5]}
    arch = {"arch": "mlp", "widths": [64]}
    first = train_model(X, y, np.arange(200), arch, recipe, 4, seed=7,
                        eval_indices=np.arange(200, 400))
    second = train_model(X, y, np.arange(200), arch, recipe, 4, seed=7)
    np.testing.assert_array_equal(predict_logits(first.model, X), predict_logits(second.model, X))
    assert first.info["train_accuracy"] > 0.9
    assert first.info["test_accuracy"] > 0.5
    other = train_model(X, y, np.arange(200), arch, recipe, 4, seed=8)
    assert not np.array_equal(predict_logits(first.model, X), predict_logits(other.model, X))


def test_a_gpu_is_set_to_compute_deterministically(monkeypatch):
    """cuDNN's default convolution backward varies from run to run: where there is a GPU,
    training and fits ask torch for deterministic kernels (on a GPU, benchmarks/determinism.py
    shows one seed giving one model). On a CPU nothing is changed."""
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms",
                        lambda mode, warn_only=False: calls.append((mode, warn_only)))
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device() == torch.device("cpu") and calls == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device() == torch.device("cuda")
    assert calls == [(True, True)] and torch.backends.cudnn.benchmark is False
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_a_milestone_falls_at_an_epochs_end_the_first_at_the_earliest():
    """Milestones are fractions of the epochs: 0.5 of 15 is after epoch 8 (the nearest), and
    0.01 of 15 after the first, where rounding to epoch 0 once never fired."""
    from miarepro.training import make_schedule

    def rates(milestones):
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        schedule = make_schedule(optimizer, {"epochs": 15, "milestones": milestones,
                                             "gamma": 0.1})
        seen = []
        for _ in range(15):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        return seen

    assert rates([0.5]) == pytest.approx([1.0] * 8 + [0.1] * 7)
    assert rates([0.01]) == pytest.approx([1.0] + [0.1] * 14)


@pytest.mark.parametrize("arch, recipe", [
    ({"arch": "mlp", "widths": [16, 8], "activation": "tanh"},  # Nesterov, decay, milestones
     {"epochs": 4, "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3,
      "batch_size": 24, "milestones": [0.5]}),  # 90 rows: the last batch is short
    ({"arch": "mlp", "widths": [64, 32]},  # 90 rows: the last batch is one row (a vector)
     {"epochs": 3, "lr": 0.1, "momentum": 0.9, "nesterov": True, "batch_size": 89}),
    ({"arch": "mlp", "widths": []}, {"epochs": 3, "optimizer": "adam", "lr": 0.01,
                                     "weight_decay": 1e-4, "loss": "mse", "batch_size": 32}),
])
def test_stacked_models_are_bitwise_the_models_trained_alone(arch, recipe):
    """Each model of a stack has the weights, accuracies and seed it gets trained alone, on
    its own rows, not those of a neighbour in the stack."""
    X, y = _data(classes=2 if recipe.get("loss") == "mse" else 4)
    rng = np.random.default_rng(1)
    rows = [np.sort(rng.choice(400, 90, replace=False)) for _ in range(3)]
    held_out = [np.setdiff1d(np.arange(400), r)[:50] for r in rows]
    classes = int(y.max()) + 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # threads may split a product, and round it, otherwise
    try:
        stacked = train_stacked(X, y, rows, arch, recipe, classes, [5, 6, 7], held_out)
        alone = [train_model(X, y, r, arch, recipe, classes, seed, h)
                 for r, seed, h in zip(rows, [5, 6, 7], held_out, strict=True)]
    finally:
        torch.set_num_threads(threads)
    # bitwise on the CPU; a GPU rounds a batched product unlike a single one (about 1e-6)
    bitwise = stacked[0].model[-1].weight.device.type == "cpu"
    keys = ("seed", "n_train", "train_accuracy", "test_accuracy")[: 4 if bitwise else 2]
    for one, two in zip(stacked, alone, strict=True):
        for (name, a), b in zip(one.model.state_dict().items(),
                                two.model.state_dict().values(), strict=True):
            if bitwise:
                assert torch.equal(a, b), name
            else:
                torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
        assert one.info["stacked"] == 3
        assert {k: one.info[k] for k in keys} == {k: two.info[k] for k in keys}
    assert not torch.equal(stacked[0].model[-1].weight, stacked[1].model[-1].weight)


@pytest.mark.parametrize("arch, recipe, reason", [
    ({"arch": "mlp", "widths": [8], "dropout": 0.5}, {}, "dropout"),
    ({"arch": "lenet"}, {}, "only MLPs"),
    ({"arch": "mlp"}, {"dp": {"epsilon": 1.0, "delta": 1e-5, "max_grad_norm": 1.0}}, "DP-SGD"),
])
def test_stacking_refuses_what_it_would_train_differently(arch, recipe, reason):
    X, y = _data()
    with pytest.raises(ValueError, match=reason):
        train_stacked(X, y, [np.arange(50)] * 2, arch, {"epochs": 1, **recipe}, 4, [0, 1])


def test_stacked_models_need_one_training_set_size():
    X, y = _data()
    with pytest.raises(ValueError, match="one training-set size"):
        train_stacked(X, y, [np.arange(50), np.arange(60)], {"arch": "mlp"}, {"epochs": 1}, 4,
                      [0, 1])


def test_training_flips_the_images_its_generator_draws_on_any_device():
    """A batch's flips come from the CPU generator that orders the batches, on a GPU too
    (torch refuses to draw onto a GPU from a CPU generator): the same rows flip anywhere."""
    batch = torch.arange(8 * 2 * 3, dtype=torch.float32).reshape(8, 1, 2, 3)
    flipped = torch.rand(8, generator=torch.Generator().manual_seed(3)) < 0.5
    assert 0 < flipped.sum() < 8  # a hand case with both kinds of rows
    out = _augment(batch.to(device()), ["flip"], torch.Generator().manual_seed(3)).cpu()
    for row, flip in zip(range(8), flipped.tolist(), strict=True):
        assert torch.equal(out[row], batch[row].flip(-1) if flip else batch[row]), row


def test_augmented_queries_shape_and_plain_query_first():
    rng = np.random.default_rng(0)
    X = rng.random((10, 1, 8, 8), dtype=np.float32)
    model = build_model({"arch": "cnn", "filters": [4]}, (1, 8, 8), 3)
    logits = predict_logits(model, X, ["flip", "shift"])
    assert logits.shape == (6, 10, 3)
    np.testing.assert_allclose(logits[0], predict_logits(model, X)[0])
    np.testing.assert_allclose(logits[1], predict_logits(model, X[..., ::-1].copy())[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec,shape", [
    ({"arch": "mlp", "widths": [], "activation": "relu"}, (30,)),
    ({"arch": "mlp", "widths": [16, 8], "activation": "leaky_relu", "dropout": 0.1}, (30,)),
    ({"arch": "lenet"}, (3, 32, 32)),
    ({"arch": "lenet", "variant": "stolen_memories"}, (1, 28, 28)),
    ({"arch": "cnn", "filters": [8, 16]}, (3, 32, 32)),
    ({"arch": "resnet", "depth": 20}, (3, 32, 32)),
    ({"arch": "resnet", "depth": 10}, (3, 32, 32)),
    ({"arch": "densenet", "depth": 121}, (3, 32, 32)),
    ({"arch": "resnet", "depth": 50, "wide": True}, (3, 32, 32)),
    ({"arch": "mobile", "variant": "mobilenet_v2"}, (3, 32, 32)),
    ({"arch": "mobile", "variant": "efficientnet_b0"}, (3, 32, 32)),
])
def test_architectures_produce_logits(spec, shape):
    import torch

    model = build_model(spec, shape, 7)
    assert model(torch.zeros(2, *shape)).shape == (2, 7)


def test_unknown_architecture_names_known_ones():
    with pytest.raises(ValueError, match="known"):
        build_model({"arch": "transformer"}, (3,), 2)
    with pytest.raises(ValueError, match="only for depth 50"):
        build_model({"arch": "resnet", "depth": 18, "wide": True}, (3, 32, 32), 2)


def test_mse_loss_and_adam_train():
    X, y = _data(classes=2)
    trained = train_model(X, y, np.arange(200), {"arch": "mlp", "widths": []},
                          {"epochs": 10, "optimizer": "adam", "lr": 0.01, "loss": "mse"}, 2, 0)
    assert trained.info["train_accuracy"] > 0.8


@pytest.mark.parametrize("spec, shape", [
    ({"arch": "wrn", "depth": 10, "width": 1}, (3, 32, 32)),
    ({"arch": "convnext", "variant": "tiny", "resize": 40}, (1, 28, 28)),
])
def test_qmia_architectures_build_and_run(spec, shape):
    model = build_model(spec, shape, 7)
    assert model(torch.zeros(2, *shape)).shape == (2, 7)


def test_convnext_weights_file_missing_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"convnext\.pt not found.*IMAGENET1K_V1"):
        build_model({"arch": "convnext", "weights": str(tmp_path / "convnext.pt")},
                    (3, 32, 32), 2)
    with pytest.raises(ValueError, match="6n \\+ 4"):
        build_model({"arch": "wrn", "depth": 27}, (3, 32, 32), 2)


def test_query_batches_do_not_change_logits():
    """Queries run in cache-sized batches (QUERY_BATCH); the batch size is a matter of speed:
    a LeNet in eval mode gives each record the same logits in any batch."""
    torch.manual_seed(0)
    model = build_model({"arch": "lenet"}, (1, 28, 28), 10)
    X = np.random.default_rng(0).random((300, 1, 28, 28), dtype=np.float32)
    np.testing.assert_allclose(predict_logits(model, X, batch_size=7),
                               predict_logits(model, X, batch_size=300), rtol=1e-6, atol=1e-6)
