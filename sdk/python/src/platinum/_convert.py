"""Converters of operation results, shared by both clients: a client
method runs an operation and passes its result through one of these
(``_method(conv)`` in _sync.py and _async.py). None of them does I/O, so
the blocking and the asyncio client use the same ones."""

from __future__ import annotations

import builtins
from typing import Any, Callable, Iterable, Mapping, TypeVar

from ._records import Record

R = TypeVar("R")
RecT = TypeVar("RecT", bound=Record)


def same(_: Any, r: R) -> R:
    """The result as it is."""
    return r


def none(_: Any, r: None) -> None:
    """No result (the call answers nothing worth returning)."""
    return None


def rec(cls: type[RecT]) -> Callable[[Any, Mapping[str, Any]], RecT]:
    """The result as a record of cls."""
    return lambda _, d: cls(d)


def recs(cls: type[RecT]) -> Callable[[Any, Iterable[Mapping[str, Any]]], builtins.list[RecT]]:
    """The result as a list of records of cls."""
    return lambda _, ds: [cls(d) for d in ds]
