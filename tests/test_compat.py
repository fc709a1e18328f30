import subprocess
import sys


def test_torchvision_and_laplace_import_on_this_torch_build():
    # a fresh interpreter, so the shim runs before anything else imported torchvision
    code = (
        "from miarepro.compat import ensure_torchvision; ensure_torchvision(); "
        "import torchvision, laplace, torch; "
        "model = torchvision.models.resnet18(num_classes=3).eval(); "
        "print(model(torch.zeros(1, 3, 32, 32)).shape)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch.Size([1, 3])" in result.stdout


_TRAIN = """
import sys
import numpy as np
import torch
if {eager}:
    from miarepro.compat import eager_optimizers
    eager_optimizers()
from miarepro.training import make_optimizer
torch.manual_seed(0)
X, y = torch.randn(64, 5), torch.randint(0, 3, (64,))
out = []
for recipe in ({{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
                "weight_decay": 1e-3}}, {{"optimizer": "adam", "lr": 1e-2, "weight_decay": 1e-3}}):
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    optimizer = make_optimizer(list(model.parameters()), recipe)
    schedule = torch.optim.lr_scheduler.MultiStepLR(optimizer, [5], 0.1)
    for _ in range(10):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(X), y).backward()
        optimizer.step()
        schedule.step()
    out += [p.detach().double().sum().item() for p in model.parameters()]
print(repr(out), "torch._dynamo" in sys.modules)
"""


def test_eager_optimizers_train_identically_without_the_tracer():
    """The same SGD (momentum, Nesterov, weight decay, milestones) and Adam runs, in fresh
    interpreters with and without :func:`eager_optimizers`: the same weights to the last bit,
    and only the plain one imports torch._dynamo."""
    runs = {}
    for eager in (False, True):
        result = subprocess.run([sys.executable, "-c", _TRAIN.format(eager=eager)],
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        weights, imported = result.stdout.rsplit(" ", 1)
        runs[eager] = (weights, imported.strip())
    assert runs[True][0] == runs[False][0]
    assert runs[False][1] == "True" and runs[True][1] == "False"
