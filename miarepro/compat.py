"""Make torchvision (and laplace-torch, which imports it) importable on a CPU-only torch build.

The PyPI torchvision wheel is a CUDA build. On the CPU torch wheel its compiled operators do not
load and ``import torchvision`` fails with "operator torchvision::nms does not exist", because two
``register_fake`` calls need those operator schemas. We define just the two schemas, and only after
a plain import failed that way, so a working (CUDA) install is never touched. Detection operators
stay unavailable on such a build; nothing in this project uses them.
"""

from __future__ import annotations

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
