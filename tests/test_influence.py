"""Layer slicing and internal influence (Stolen Memories, Eq. 8-9): miarepro.influence."""

import itertools

import pytest
import torch
from torch import nn

from miarepro.influence import (
    internal_influence,
    layer_boundaries,
    local_linear,
    split_at,
)
from miarepro.models import build_model

F64 = torch.float64


@pytest.fixture(autouse=True)
def _threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def _mlp_top(activation: str = "relu", seed: int = 0) -> tuple[nn.Sequential, torch.Tensor,
                                                                torch.Tensor]:
    """A random 6-16-16-4 MLP sliced at its first Linear: g, 32 feature rows, their classes."""
    torch.manual_seed(seed)
    model = build_model({"arch": "mlp", "widths": [16, 16], "activation": activation},
                        (6,), 4).to(F64)
    _, g = split_at(model, layer_boundaries(model)[0])
    scale = 3.0 if activation == "tanh" else 1.0  # tanh: reach its curved part
    z = scale * torch.randn(32, 6, dtype=F64)
    return g, z, torch.randint(0, 4, (32,))


def _lenet_conv_top(seed: int = 0) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    """Stolen Memories' LeNet on 8x8 inputs, sliced at its second Conv2d: g, z = h(x), classes."""
    torch.manual_seed(seed)
    model = build_model({"arch": "lenet", "variant": "stolen_memories"}, (1, 8, 8), 10).to(F64)
    h, g = split_at(model, layer_boundaries(model)[1])
    with torch.no_grad():
        z = h(torch.rand(6, 1, 8, 8, dtype=F64))
    return g, z, torch.randint(0, 10, (6,))


def _efficiency_error(g: nn.Module, z: torch.Tensor, classes: torch.Tensor,
                      steps: int) -> float:
    """Relative error of Eq. 8: |Σ_j χ_j z_j − (g_y(z) − g_y(0))| / |g_y(z) − g_y(0)| (norms
    over the rows)."""
    weights, bias = local_linear(g, z, classes, steps)
    with torch.no_grad():
        logit = g(z).gather(1, classes[:, None])[:, 0]
    explained = (weights * z).flatten(1).sum(1)
    return float((explained - (logit - bias)).norm() / (logit - bias).norm())


def test_layer_boundaries():
    mlp = build_model({"arch": "mlp", "widths": [60]}, (1, 28, 28), 10)
    assert layer_boundaries(mlp) == [1, 3]
    lenet = build_model({"arch": "lenet", "variant": "stolen_memories"}, (1, 28, 28), 10)
    boundaries = layer_boundaries(lenet)
    assert len(boundaries) == 4
    assert [type(lenet[k]) for k in boundaries] == [nn.Conv2d, nn.Conv2d, nn.Linear, nn.Linear]
    assert boundaries[-1] == len(lenet) - 1  # the top layer is the output layer
    with pytest.raises(TypeError, match=r"needs an nn\.Sequential, got Linear"):
        layer_boundaries(nn.Linear(2, 2))


def test_split_composes_to_the_model_in_eval_mode():
    torch.manual_seed(0)
    model = build_model({"arch": "lenet", "variant": "stolen_memories"}, (1, 12, 12), 10)
    model.train()  # dropout on: split_at must switch it off
    x = torch.rand(5, 1, 12, 12)
    for k in layer_boundaries(model):
        h, g = split_at(model, k)
        assert not h.training and not g.training
        cut = len(g) - (len(model) - k)  # model[k]'s place in g
        assert g[cut] is model[k]  # shared modules, so shared parameters
        # the dropout just below the cut goes with g
        assert all(isinstance(m, (nn.Dropout, nn.Flatten)) for m in g[:cut])
        assert len(h) + len(g) == len(model)
        assert not any(isinstance(m, nn.Dropout) for m in h[-2:])  # LeNet: Dropout, Flatten
        assert {id(p) for p in [*h.parameters(), *g.parameters()]} == {
            id(p) for p in model.parameters()}
        with torch.no_grad():
            torch.testing.assert_close(g(h(x)), model.eval()(x))
    with pytest.raises(ValueError, match="outside"):
        split_at(model, len(model))


def test_a_fresh_top_part_trains_with_the_dropout_below_its_cut():
    """Stolen Memories trains proxies of the layers above a cut "using the same algorithm and
    hyperparameters": a fresh top part of a dropout MLP drops its input features in training,
    as the target's top layer did, and passes them unchanged in eval mode."""
    torch.manual_seed(2)
    model = build_model({"arch": "mlp", "widths": [16], "dropout": 0.5}, (4,), 3)
    h, g = split_at(model, layer_boundaries(model)[-1])
    features = torch.ones(64, 16)
    assert isinstance(h[-1], nn.ReLU) and isinstance(g[0], nn.Dropout)
    assert (g.train()[0](features) == 0).any()
    torch.testing.assert_close(g.eval()[0](features), features)


def test_top_layer_influence_is_the_weight_row():
    torch.manual_seed(1)
    model = build_model({"arch": "mlp", "widths": [60], "dropout": 0.5}, (9,), 7)
    _, g = split_at(model, layer_boundaries(model)[-1])
    classes = torch.randint(0, 7, (40,))
    expected = model[-1].weight[classes].detach()
    for z in (torch.randn(40, 60), 100 * torch.rand(40, 60), torch.zeros(40, 60)):
        for steps in (1, 5):
            torch.testing.assert_close(internal_influence(g, z, classes, steps), expected)


@pytest.mark.parametrize("top", [_mlp_top, _lenet_conv_top], ids=["mlp", "lenet_conv2"])
def test_efficiency_with_relu_and_max_pool(top):
    g, z, classes = top()
    assert _efficiency_error(g, z, classes, 2048) < 1e-3
    # piecewise-constant path gradients: first-order convergence, still a clear decrease
    assert _efficiency_error(g, z, classes, 128) < _efficiency_error(g, z, classes, 8) / 4


def test_midpoint_rule_is_second_order_for_smooth_activations():
    g, z, classes = _mlp_top("tanh")
    errors = [_efficiency_error(g, z, classes, steps) for steps in (8, 16, 32, 64)]
    assert errors[-1] < 1e-4
    for coarse, fine in itertools.pairwise(errors):
        assert coarse / fine > 3  # ≈ 4 = 2²


def test_chunking_does_not_change_influence():
    g, z, classes = _lenet_conv_top()
    one = internal_influence(g, z, classes, steps=8, chunk_size=1)
    torch.testing.assert_close(internal_influence(g, z, classes, steps=8, chunk_size=1000), one)
    torch.testing.assert_close(internal_influence(g, z, classes, steps=8, chunk_size=4), one)
    assert one.shape == z.shape


def test_hand_computed_influence_with_a_relu_switching_on_halfway():
    """g(z) = 2·relu(z1 + 2·z2 − 1.5) + 0.5 at z = (1, 1): along t·z the pre-activation is
    3t − 1.5, so the ReLU is off for t < 1/2 and on after; the gradient is 0 then 2·(1, 2),
    χ = 1/2 · 2·(1, 2) = (1, 2), and χ·z = 3 = g(z) − g(0) = 3.5 − 0.5."""
    hidden, out = nn.Linear(2, 1).to(F64), nn.Linear(1, 1).to(F64)
    with torch.no_grad():
        hidden.weight.copy_(torch.tensor([[1.0, 2.0]]))
        hidden.bias.fill_(-1.5)
        out.weight.fill_(2.0)
        out.bias.fill_(0.5)
    g = nn.Sequential(hidden, nn.ReLU(), out)
    z = torch.tensor([[1.0, 1.0]], dtype=F64)
    # an even number of midpoints: exactly half of them lie past t = 1/2
    weights, bias = local_linear(g, z, 0, steps=4)
    torch.testing.assert_close(weights, torch.tensor([[1.0, 2.0]], dtype=F64))
    torch.testing.assert_close(bias, torch.tensor([0.5], dtype=F64))
    with torch.no_grad():
        assert (weights * z).sum() + bias == g(z)[0, 0] == 3.5


def test_influence_runs_in_eval_mode_and_restores_training_flags():
    torch.manual_seed(2)
    model = build_model({"arch": "mlp", "widths": [32], "dropout": 0.5}, (5,), 3)
    _, g = split_at(model, layer_boundaries(model)[0])
    z, classes = torch.randn(10, 5), torch.randint(0, 3, (10,))
    expected = internal_influence(g, z, classes, 16)
    g.train()
    torch.testing.assert_close(internal_influence(g, z, classes, 16), expected)  # no dropout
    assert all(m.training for m in g.modules())
    with pytest.raises(ValueError, match="classes"):
        internal_influence(g, z, classes[:3], 16)
