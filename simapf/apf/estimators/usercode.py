"""Calling a LIST policy of the user's own, so that what goes wrong in it is reported as theirs.

simapf runs a user's policy when it builds it (`__init__`) and for every LIST and initializing
WATCH (`estimate`). Whatever it raises there, and whatever `estimate` returns that is not a
`WorkEstimate` of valid seats, ends the run with a `UserCodeError`: one line naming the file and
line in their code, the policy and the call, e.g.

    /home/me/mine.py:7: LIST policy 'mine:Policy' estimate raised ZeroDivisionError: division by zero

The user's exception is its cause, for `simapf --debug`. The shipped policies are called
directly: they pay nothing for this.

Valid seats are what the shipped policies return: `initial_seats` an int >= 1, `final_seats`
and `additional_latency_ns` ints >= 0 (a bool or a float is not seats). There is no upper cap:
as with the `constant` policy, a request wider than its level's concurrency limit waits until
the level is idle, as upstream's queueset lets it.
"""

from __future__ import annotations

import inspect
import os
import reprlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from simapf.apf.estimators.base import EstimatorConfigError
from simapf.apf.types import WorkEstimate
from simapf.errors import UserCodeError

_MAX_MESSAGE = 500  # characters of the user's exception message kept on the one line
_SIGNATURE = {"estimate": "estimate(attrs, ctx, from_cache)", "__init__": "__init__(**list_params)"}

_SIMAPF = str(Path(__file__).parents[2]) + os.sep  # simapf's own files are not the user's
_shown = reprlib.Repr()
_shown.maxstring = 60
_shown.maxother = 100  # a WorkEstimate in a list, whole


def policy_label(spec: Any, cls: type) -> str:
    """How the user named the policy: 'package.module:Class', or that made up for a class."""
    return spec if isinstance(spec, str) else f"{cls.__module__}:{cls.__qualname__}"


def construct(cls: type, params: dict[str, Any], label: str) -> Any:
    """`cls(**params)`, the user's class: whatever its `__init__` raises becomes one line."""
    try:
        return cls(**params)
    except EstimatorConfigError:
        raise  # the class refuses its parameters in simapf's own words
    except Exception as e:  # noqa: BLE001  (anything the user's code raises is theirs to fix)
        raise _raised(e, cls, label, "__init__", getattr(cls, "__init__")) from _without_our_frame(e)


def checked_estimate(policy: Any, label: str) -> Callable[..., WorkEstimate]:
    """The user's `policy.estimate`, called so that an exception or a return value that is not
    seats ends the run in one line."""
    estimate = policy.estimate
    cls = type(policy)

    def estimate_checked(attrs: Any, ctx: Any, from_cache: bool) -> WorkEstimate:
        try:
            est = estimate(attrs, ctx, from_cache)
        except Exception as e:  # noqa: BLE001  (anything the user's code raises is theirs to fix)
            raise _raised(e, cls, label, "estimate", estimate) from _without_our_frame(e)
        # Valid seats, tested inline: this runs for every LIST.
        if (type(est) is WorkEstimate and type(est.initial_seats) is int and est.initial_seats >= 1
                and type(est.final_seats) is int and est.final_seats >= 0
                and type(est.additional_latency_ns) is int and est.additional_latency_ns >= 0):  # fmt: skip
            return est
        problem = not_seats(est)
        if problem is None:  # a subclass of WorkEstimate, with valid seats
            return est
        raise UserCodeError(f"{_defined_at(estimate)}LIST policy {label!r} estimate returned {problem}")

    return estimate_checked


def not_seats(est: Any) -> str | None:
    """What is wrong with `est` as an estimate (None: nothing), said after "returned"."""
    if not isinstance(est, WorkEstimate):
        return (f"{_shown.repr(est)} ({type(est).__name__}), not a WorkEstimate: return "
                "initial_only(seats) or WorkEstimate(initial_seats, final_seats, additional_latency_ns)")
    for name, least in (("initial_seats", 1), ("final_seats", 0), ("additional_latency_ns", 0)):
        value = getattr(est, name)
        if type(value) is not int or value < least:  # a bool is an int, but not seats
            return (f"a WorkEstimate with {name} {_shown.repr(value)} ({type(value).__name__}): "
                    f"it must be an integer >= {least}")
    return None


def _raised(e: BaseException, cls: type, label: str, call: str, func: Any) -> UserCodeError:
    where = where_in(e, _files_of(cls, label, func))
    hint = ""
    if not where:  # no frame of theirs ran: the call itself failed (a wrong signature, say)
        where = _defined_at(func) or _class_at(cls)
        hint = f" (simapf calls {_SIGNATURE[call]})" if isinstance(e, TypeError) else ""
    return UserCodeError(f"{where}LIST policy {label!r} {call} raised {_one_line(e)}{hint}")


def _files_of(cls: type, label: str, func: Any) -> set[str]:
    """The source files of the user's policy: the module they named, the class's, the method's
    (simapf's own, where a method is inherited from `ListWorkPolicy`, are not theirs)."""
    files = {getattr(sys.modules.get(name), "__file__", None) for name in (label.partition(":")[0], cls.__module__)}
    code = _code_of(func)
    files.add(code.co_filename if code is not None else None)
    return {f for f in files if f and not f.startswith(_SIMAPF)}


def where_in(e: BaseException, files: set[str]) -> str:
    """`file:line: ` of the innermost frame in the user's files: where their code went wrong,
    even when the exception was raised inside a library it called."""
    tb: TracebackType | None = e.__traceback__
    last = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            last = tb
        tb = tb.tb_next
    return f"{last.tb_frame.f_code.co_filename}:{last.tb_lineno}: " if last is not None else ""


def _defined_at(func: Any) -> str:
    """`file:line: ` of the user's method itself, for what happened around it rather than in it."""
    code = _code_of(func)
    return f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""


def _class_at(cls: type) -> str:
    """`file:line: ` of the user's class, when the method called is not theirs (inherited, built in)."""
    try:
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return ""
    return f"{file}:{line}: " if file and not file.startswith(_SIMAPF) else ""


def _code_of(func: Any) -> Any:
    """The code object of the user's function or method; None for a built-in or one of simapf's."""
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    return code if code is not None and not code.co_filename.startswith(_SIMAPF) else None


def _one_line(e: BaseException) -> str:
    try:
        text = " ".join(part.strip() for part in str(e).splitlines())
    except Exception:  # noqa: BLE001  (an exception whose message cannot be made)
        text = ""
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _without_our_frame(e: BaseException) -> BaseException:
    # The traceback starts in the wrapper that caught it; the user's starts one frame further.
    tb = e.__traceback__
    if tb is not None and tb.tb_next is not None:
        e.__traceback__ = tb.tb_next
    return e
