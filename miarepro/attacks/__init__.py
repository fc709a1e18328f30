"""Attack families, registered by name. Importing this package registers all of them."""

from miarepro.attacks import (  # noqa: F401
    attack_r,
    bmia,
    calibrated,
    iha,
    lira,
    loo,
    marginal,
    qmia,
    rmia,
    shadow,
    stolen_memories,
    subpop,
)
from miarepro.attacks.base import REGISTRY, AttackContext, AttackSpec, get_attack, register

__all__ = ["REGISTRY", "AttackContext", "AttackSpec", "get_attack", "register"]
