"""Check a component's options against its function signature, before any job runs.

Attacks, architectures and dataset loaders are plain functions whose keyword parameters are the
options a config may set. Their annotations say what a value may be: ``Literal[...]`` for a
choice, ``Annotated[float, Range(0, 1)]`` for a bounded number, ``int`` / ``float`` / ``bool``
/ ``list`` / ``str`` for a type. :func:`check_options` reads them, so a component states its
options once, where it uses them, and a typo (``widht``, ``statistic: hinj``) fails at start-up
with the key, the bad value, the allowed values and the nearest known name.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Range:
    """Annotation metadata: a number in ``[low, high]`` (either end open or absent)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None
                    and (value > self.high or (self.high_open and value == self.high)))

    def __str__(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"


class OptionError(ValueError):
    """An option is unknown, missing or out of range; the message names it."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the nearest known name, or an empty string."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown(what: str, name: Any, known: Iterable[Any], owner: str = "") -> str:
    """The message for an unknown name: what it is, the nearest match and every known one."""
    known = sorted(known, key=str)
    owner = f" of {owner}" if owner else ""
    return f"unknown {what} {name!r}{owner}{did_you_mean(name, known)}; known: {known}"


def parameters(fn: Callable[..., Any], skip: int = 1) -> list[inspect.Parameter]:
    """The keyword options of ``fn``: its parameters after the first ``skip`` positional ones."""
    return list(_signature(fn).parameters.values())[skip:]


@functools.cache
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    """Signatures of the registered functions, read once: building a paper config's DAG asks
    for them tens of thousands of times."""
    return inspect.signature(fn)


def evaluated_annotation(fn: Callable[..., Any], parameter: inspect.Parameter) -> Any:
    """The evaluated annotation of one parameter, or None where it cannot be evaluated here."""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        namespace = {**vars(typing), **getattr(inspect.unwrap(fn), "__globals__", {})}
        try:
            annotation = eval(annotation, namespace)  # annotations of our own modules only
        except Exception:  # a type of an optional heavy library (torch): no check
            return None
    return None if annotation is inspect.Parameter.empty else annotation


def check_value(value: Any, annotation: Any, where: str) -> None:
    """Raise OptionError unless ``value`` fits ``annotation`` (see the module docstring)."""
    if annotation is None:
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        check_value(value, args[0], where)
        for meta in args[1:]:
            if isinstance(meta, Range) and not meta.contains(value):
                raise OptionError(f"{where}: {value!r} is outside {meta}")
            if hasattr(meta, "check"):  # a component's own validator (e.g. an architecture)
                meta.check(value, where)
        return
    if origin is typing.Literal:
        if value not in args:
            raise OptionError(f"{where}: " + unknown("value", value, args))
        return
    if origin in (typing.Union, types.UnionType):
        errors = []
        for option in args:
            try:
                return check_value(value, option, where)
            except OptionError as error:
                errors.append(str(error))
        raise OptionError(errors[0])
    if annotation is type(None):
        if value is not None:
            raise OptionError(f"{where}: expected null, got {value!r}")
        return
    expected = {int: (int,), float: (int, float), bool: (bool,), str: (str,),
                list: (list, tuple), tuple: (list, tuple)}.get(origin or annotation)
    if expected and (not isinstance(value, expected)
                     or (bool not in expected and isinstance(value, bool))):
        raise OptionError(f"{where}: expected {getattr(origin or annotation, '__name__', '?')}, "
                          f"got {value!r}")
    if origin in (list, tuple) and args and isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_value(item, args[0], f"{where}[{i}]")


def check_options(fn: Callable[..., Any], options: dict[str, Any], where: str, what: str,
                  skip: int = 1) -> None:
    """Reject unknown, missing or ill-typed options of ``fn``, naming the key path."""
    params = parameters(fn, skip)
    known = {p.name: p for p in params}
    for key in options:
        if key not in known:
            raise OptionError(f"{where}.{key}: " + unknown("option", key, known, what))
    missing = [p.name for p in params if p.default is inspect.Parameter.empty
               and p.name not in options]
    if missing:
        raise OptionError(f"{where}: {what} needs {missing}")
    for key, value in options.items():
        check_value(value, evaluated_annotation(fn, known[key]), f"{where}.{key}")
