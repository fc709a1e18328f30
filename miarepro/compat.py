"""Make torchvision (and laplace-torch, which imports it) importable on a CPU-only torch build.

The PyPI torchvision wheel is a CUDA build. On the CPU torch wheel its compiled operators do not
load and ``import torchvision`` fails with "operator torchvision::nms does not exist", because two
``register_fake`` calls need those operator schemas. We define just the two schemas, and only after
a plain import failed that way, so a working (CUDA) install is never touched. Detection operators
stay unavailable on such a build; nothing in this project uses them.
"""

from __future__ import annotations

import sys

import torch

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_fragment: torch.library.Library | None = None


def ensure_torchvision() -> None:
    """Import torchvision, registering the missing operator schemas first if the build needs it."""
    global _fragment
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::nms" not in str(error) or _fragment is not None:
            raise
        _fragment = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS:
            _fragment.define(schema)
        import torchvision  # noqa: F401


def eager_optimizers() -> None:
    """Let torch.optim run without importing torch._dynamo, which costs 1.5 s per process.

    torch.optim imports torch.compile's tracer (``torch._dynamo``, well over a thousand modules)
    the first time an optimizer is built and the first time it steps, only to mark four methods
    as not traceable (``torch._disable_dynamo``) and to break the trace graph around ``step``;
    outside torch.compile both do nothing. The workflow trains every model in a process of its
    own, so on two cores that import was about a tenth of the default run. Here the four
    methods get their own undecorated function as the cached "disabled" version (what
    ``_disable_dynamo`` would compute, minus the tracer), and ``step`` of SGD, Adam and AdamW
    gets the eager half of ``_use_grad_for_differentiable`` (grad mode from
    ``defaults["differentiable"]``). No result changes. This project never compiles; under
    torch.compile the skipped graph break would matter. Each part checks the internals it
    relies on and leaves torch as it is if they differ (a newer torch then just pays the import).
    """
    global _optimizers_eager
    if _optimizers_eager or "torch._dynamo" in sys.modules:
        return
    import functools

    from torch._compile import _disable_dynamo
    from torch.optim import SGD, Adam, AdamW, Optimizer

    decorated = _disable_dynamo(lambda: None).__code__  # every such wrapper shares this code
    for method in vars(Optimizer).values():
        if getattr(method, "__code__", None) is decorated and hasattr(method, "__wrapped__"):
            method.__wrapped__.__dynamo_disable = method.__wrapped__
    for cls in (SGD, Adam, AdamW):
        step = cls.__dict__.get("step")
        raw = getattr(step, "__wrapped__", None)
        if raw is None or getattr(step, "__code__", None) is None or \
                step.__code__.co_name != "_use_grad":
            continue

        def eager_step(self, *args, _raw=raw, **kwargs):
            previous = torch.is_grad_enabled()
            try:
                torch.set_grad_enabled(self.defaults["differentiable"])
                return _raw(self, *args, **kwargs)
            finally:
                torch.set_grad_enabled(previous)

        cls.step = functools.wraps(raw)(eager_step)
    _optimizers_eager = True


_optimizers_eager = False
