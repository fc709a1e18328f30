"""The attack interface: one context per target model in, one score per audited sample out.

An attack is a plain function ``fn(ctx, **params) -> np.ndarray`` of shape ``(len(ctx.audit),)``,
higher meaning "more likely a member". It is registered under a family name with
:func:`register`; a study's config lists attack instances by name, each naming its family and
its parameters. Black-box attacks read only the logits in the context; white-box attacks (IHA,
Stolen Memories, Subpop) also use ``ctx.study``, a lazy handle to the dataset, models and recipe.
Query attacks (MERLIN, black-box Subpop) ask the target about inputs of their own: their
``ctx.study`` is a :class:`QueryAccess`, which runs forward passes and hands out nothing else.

Attacks with models of their own (BMIA's Laplace posterior, QMIA's quantile regressor, Subpop's
generator, Stolen Memories' meta models) register a **fit** function beside the score
function: ``fit(study, group, **fit_params) -> (arrays, info)``. The workflow runs it in a
``fit`` job of its own (GPU-capable, cached) and hands its arrays to scoring as ``ctx.fit``. An
attack entry's parameters go to whichever function's signature names them, so editing a
scoring parameter reruns scoring only and editing a fit parameter refits. A fit is made once per
*group*: per target model (``fit_scope="target"``) or per set of reference models
(``fit_scope="references"``: one per repetition of a partition study, one for a balanced study,
whose targets share their references), and attack instances with equal fit parameters share it.

Attacks that threshold a score against a predicted non-member quantile (the marginal baseline,
LiRA's OUT Gaussian, QMIA) may also register **quantiles**:
``quantiles(ctx, taus, **params) -> (statistic, thresholds)``, the target's statistic on the
audited samples ``(N,)`` and the ``taus`` quantiles the attack implies for it ``(N, L)``, or
None where it implies none. The score step then reports the pinball loss of those thresholds
on the non-members (QMIA Tables 6 and 7) and the share of non-members they flag (QMIA's
Theorem 1: ``a`` at the ``1 - a`` quantile).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from miarepro import signals
from miarepro.options import OptionError, check_options, parameters, unknown

_CHUNK_ELEMENTS = 1 << 18  # logits turned into statistics at a time (1-2 MB: stays in cache)


class StudyHandle(Protocol):
    """What white-box attacks may load (:class:`miarepro.pipeline.StudyFiles` implements it)."""

    def features(self) -> np.ndarray: ...

    def labels(self) -> np.ndarray: ...

    def signals(self, role: str, index: int) -> np.ndarray: ...

    def load_model(self, role: str, index: int) -> Any: ...

    def training_indices(self, role: str, index: int) -> np.ndarray: ...

    def parts(self, group: int) -> dict[str, np.ndarray]: ...

    def reference_index(self, group: int, i: int) -> int: ...

    def recipe(self) -> dict[str, Any]: ...

    def fit_seed(self, group: int) -> int: ...

    def meta(self) -> dict[str, Any]: ...

    def new_model(self) -> Any: ...

    def query(self, role: str, index: int, inputs: np.ndarray) -> np.ndarray: ...


class QueryAccess:
    """The study as a query attack sees it: the data the attacker holds and the models' outputs
    on inputs of its choice (logits, float64), but no weights, gradients or training sets."""

    def __init__(self, study: StudyHandle) -> None:
        self._study = study

    def features(self) -> np.ndarray:
        return self._study.features()

    def labels(self) -> np.ndarray:
        return self._study.labels()

    def query(self, role: str, index: int, inputs: np.ndarray) -> np.ndarray:
        return self._study.query(role, index, inputs)


@dataclass(frozen=True)
class AttackContext:
    """Inputs of one attack on one target model.

    Indices (``audit``, ``population``, ``validation``) point into the study dataset of ``M``
    samples; all logits cover every one of those ``M`` samples.

    - ``labels``: ``(M,)`` integer labels.
    - ``audit``: ``(N,)`` the samples scored; membership is ``target_mask[audit]``.
    - ``population``: samples no model trained on (RMIA's ``Z``, QMIA's training data).
    - ``target_logits``: ``(A, M, C)``, ``A`` = queries per sample (1, or augmentations).
    - ``reference_logits``: ``(K, A, M, C)`` for the ``K`` reference models this attack asked for.
    - ``reference_masks``: ``(K, M)`` True where reference model ``k`` trained on the sample.
    - ``reference_pool``: the attacker's own records (the split's reference pool). Reference
      models train on halves of it, or of the union of the parts the split's
      ``references_train_on`` names (QMIA's studies: the target's training set and this
      pool; :func:`miarepro.splits.reference_training_pool`).
    - ``loo_logits``: ``(N, J, A, C)`` for attacks registered with ``needs_loo``: the logits of
      ``J`` leave-one-out models on each audited sample ``audit[i]``, each trained on the target's
      training set without that sample. The workflow then restricts ``audit`` to those records.
    """

    labels: np.ndarray
    audit: np.ndarray
    population: np.ndarray
    validation: np.ndarray
    target_logits: np.ndarray
    target_mask: np.ndarray
    reference_logits: np.ndarray
    reference_masks: np.ndarray
    reference_pool: np.ndarray
    loo_logits: np.ndarray | None = None
    fit: dict[str, np.ndarray] | None = None
    target_index: int = 0
    seed: int = 0
    study: StudyHandle | None = field(default=None, compare=False, repr=False)
    #: statistics of the reference models on the audit, computed once per context: the score
    #: and the implied quantiles of one attack both read them (not copied by ``replace``)
    _audit_statistics: dict[str, np.ndarray] = field(default_factory=dict, init=False,
                                                     compare=False, repr=False)

    @property
    def public(self) -> np.ndarray:
        """The attacker's records known to be non-members (:func:`miarepro.splits.public`)."""
        from miarepro.splits import public

        return public({"population": self.population, "reference_pool": self.reference_pool,
                       "audit": self.audit})

    @property
    def n_references(self) -> int:
        return int(self.reference_logits.shape[0])

    def target_statistic(self, name: str, indices: np.ndarray | None = None) -> np.ndarray:
        """Member-high statistic of the target on ``indices`` (default: audit), ``(A, n)``."""
        idx = self.audit if indices is None else indices
        return signals.statistic(name, self.target_logits[:, idx], self.labels[idx])

    def reference_statistic(self, name: str, indices: np.ndarray | None = None) -> np.ndarray:
        """Member-high statistic of every reference model, ``(K, A, n)``.

        Computed one model and a few thousand samples at a time, on the requested samples only,
        so no float64 copy of the whole ``(K, A, M, C)`` logits array is made (at 64 models x
        50,000 samples x 100 classes the float32 logits alone are 1.3 GB). On the audit (no
        ``indices``) the result is kept and returned read-only.
        """
        if indices is None:
            if name not in self._audit_statistics:
                values = self._reference_statistic(name, self.audit)
                values.flags.writeable = False
                self._audit_statistics[name] = values
            return self._audit_statistics[name]
        return self._reference_statistic(name, np.asarray(indices))

    def _reference_statistic(self, name: str, idx: np.ndarray) -> np.ndarray:
        logits = self.reference_logits
        n_models, n_queries, n_classes = logits.shape[0], logits.shape[1], logits.shape[-1]
        if n_models == 0:
            raise ValueError("this attack needs reference models, but the context has none")
        block = max(1, _CHUNK_ELEMENTS // (n_queries * n_classes))
        labels = self.labels[idx]
        out = np.empty((n_models, n_queries, len(idx)), dtype=np.float64)
        for k in range(n_models):
            for start in range(0, len(idx), block):
                part = slice(start, start + block)
                out[k, :, part] = signals.statistic(name, logits[k][:, idx[part]], labels[part])
        return out

    def reference_in(self, indices: np.ndarray | None = None) -> np.ndarray:
        """``(K, n)`` booleans: did reference model ``k`` train on each sample?"""
        idx = self.audit if indices is None else indices
        return self.reference_masks[:, idx]


AttackFn = Callable[..., np.ndarray]
FitFn = Callable[..., tuple[dict[str, np.ndarray], dict[str, Any]]]
QuantileFn = Callable[..., tuple[np.ndarray, np.ndarray] | None]
FIT_SCOPES = ("target", "references")


@dataclass(frozen=True)
class AttackSpec:
    """A registered attack family and what the workflow must provide for it."""

    name: str
    fn: AttackFn
    needs_references: bool
    needs_loo: bool
    whitebox: bool
    description: str
    fit: FitFn | None = None
    fit_scope: str = "target"
    quantiles: QuantileFn | None = None
    #: families that register one fit function under one ``fit_name`` share their fits
    fit_name: str = ""
    #: reads the target's training set beyond the audited record (IHA's leave-one-out
    #: knowledge: the attacker knows every training record but the audited one)
    knows_training_set: bool = False
    #: the attack's own decision rule, "member iff score > threshold" (a predicted member
    #: probability: 1/2), for Stolen Memories' accuracy / precision / recall; None if the
    #: score is only a ranking
    threshold: float | None = None
    #: runs the target on inputs of its own (``ctx.study`` is a :class:`QueryAccess`)
    queries: bool = False
    #: trains on the attacker's public non-members (:func:`miarepro.splits.public`)
    public_data: bool = False

    @property
    def loads_models(self) -> bool:
        """Whether scoring needs the models' checkpoints, not only their saved logits."""
        return self.whitebox or self.queries

    def defaults(self) -> dict[str, Any]:
        """Default of every parameter: scoring ones (after ``ctx``) and fit ones (after
        ``study, group``)."""
        params = parameters(self.fn) + (parameters(self.fit, skip=2) if self.fit else [])
        return {p.name: p.default for p in params if p.default is not p.empty}

    def split_params(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(fit parameters, scoring parameters) of an attack entry's parameters."""
        fit_names = {p.name for p in parameters(self.fit, skip=2)} if self.fit else set()
        return ({k: v for k, v in params.items() if k in fit_names},
                {k: v for k, v in params.items() if k not in fit_names})

    def check_params(self, params: dict[str, Any], where: str,
                     workflow_keys: frozenset[str] = frozenset()) -> None:
        """Reject unknown, missing or out-of-range parameters, naming the bad key. The keys of
        an entry that the workflow consumes (``workflow_keys``, not in ``params``) are listed
        among the known ones, so a misspelt one finds its nearest name."""
        known = {p.name for p in parameters(self.fn)} | (
            {p.name for p in parameters(self.fit, skip=2)} if self.fit else set())
        owner = f"attack {self.name!r}" + (" (its options and the workflow's keys)"
                                           if workflow_keys else "")
        for key in params:
            if key not in known:
                raise OptionError(f"{where}.{key}: " + unknown("option", key,
                                                                known | workflow_keys, owner))
        fit_params, score_params = self.split_params(params)
        if self.fit:
            check_options(self.fit, fit_params, where, f"attack {self.name!r}", skip=2)
        check_options(self.fn, score_params, where, f"attack {self.name!r}")

    def fit_key(self, params: dict[str, Any], n_reference: int) -> str:
        """The name of the fit an attack entry needs: family, references and fit parameters.

        Defaults are filled in first, so entries that differ only in scoring parameters, or
        spell out a default, share one fit. Long or structured values are hashed.
        """
        settings = {p.name: p.default for p in parameters(self.fit, skip=2)}
        settings.update(self.split_params(params)[0])
        parts = [self.fit_name or self.name]
        parts += [f"n{n_reference}"] if self.fit_scope == "references" else []
        parts += [f"{key}={_canonical(value)}" for key, value in sorted(settings.items())]
        key = "-".join(str(part) for part in parts)
        if len(key) > 80 or not all(c.isalnum() or c in "-_=." for c in key):
            digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
            key = f"{parts[0]}-{digest[:12]}"
        return key


def _canonical(value: Any) -> Any:
    """``value`` with the keys of its mappings sorted, at every depth: a fit's name must not
    change with the order in which a config spells a structured parameter's keys."""
    if isinstance(value, dict):
        return {key: _canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return type(value)(_canonical(item) for item in value)
    return value


REGISTRY: dict[str, AttackSpec] = {}


def register(
    name: str, *, needs_references: bool = False, needs_loo: bool = False, whitebox: bool = False,
    fit: FitFn | None = None, fit_scope: str = "target", quantiles: QuantileFn | None = None,
    fit_name: str = "", knows_training_set: bool = False, threshold: float | None = None,
    queries: bool = False, public_data: bool = False,
) -> Callable[[AttackFn], AttackFn]:
    """Register ``fn`` as attack family ``name``; the first docstring line describes it.

    The registered function checks its parameters against ``fn``'s annotations on every call
    (:func:`miarepro.options.check_options`), the same check the config gets at start-up.
    """

    def decorate(fn: AttackFn) -> AttackFn:
        if name in REGISTRY:
            raise ValueError(f"attack {name!r} registered twice")

        @functools.wraps(fn)
        def checked(ctx: AttackContext, **params: Any) -> np.ndarray:
            check_options(fn, params, f"attack {name!r}", f"attack {name!r}")
            return fn(ctx, **params)

        if fit_scope not in FIT_SCOPES:
            raise ValueError(f"fit_scope must be one of {FIT_SCOPES}, got {fit_scope!r}")
        doc = (fn.__doc__ or "").strip().splitlines()
        REGISTRY[name] = AttackSpec(
            name, checked, needs_references, needs_loo, whitebox, doc[0] if doc else "",
            fit, fit_scope, quantiles, fit_name, knows_training_set, threshold, queries,
            public_data,
        )
        return fn

    return decorate


def get_attack(name: str) -> AttackSpec:
    if name not in REGISTRY:
        raise KeyError(unknown("attack", name, REGISTRY))
    return REGISTRY[name]

