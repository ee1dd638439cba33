"""Choosing a LIST policy by name, with parameters, or by the import path of a user's class.

    make_list_policy("size-based")
    make_list_policy("etcd-uncapped", max_list_seats=200)
    make_list_policy("mypkg.policies:HalfPrice", factor=0.5)
    make_list_policy(HalfPrice, factor=0.5)

Errors a user can cause (unknown name, module or class not found, not a policy, bad parameters)
raise `EstimatorConfigError` with a message that names what was asked for; a user's class whose
`__init__` raises, `UserCodeError` (see `usercode`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from typing import Any

from simapf.apf.estimators.base import EstimatorConfigError
from simapf.apf.estimators.listing import (
    BorrowingAwareListPolicy,
    ConstantListPolicy,
    CountBasedListPolicy,
    EtcdUncappedListPolicy,
    ListWorkPolicy,
    SizeBasedListPolicy,
    StreamedCacheCapListPolicy,
    UpstreamListPolicy,
)
from simapf.apf.estimators.usercode import checked_estimate, construct, policy_label, where_in

# One default everywhere (the registry, WorkEstimator and the scenario schema): what kube-apiserver
# does, the size- or count-based estimate as its SizeBasedListCostEstimate gate says.
DEFAULT_LIST_POLICY = "upstream"

_REGISTRY: dict[str, type] = {
    cls.name: cls
    for cls in (
        SizeBasedListPolicy,
        CountBasedListPolicy,
        UpstreamListPolicy,
        ConstantListPolicy,
        EtcdUncappedListPolicy,
        StreamedCacheCapListPolicy,
        BorrowingAwareListPolicy,
    )
}


# The policies simapf ships: called directly. Any other class is the user's code, built and
# called through `usercode` (registering it under a short name does not make it simapf's).
SHIPPED: frozenset[type] = frozenset(_REGISTRY.values())


def shipped_policy_names() -> list[str]:
    """The names of the policies simapf ships, the default first, then as registered."""
    names = [name for name, cls in _REGISTRY.items() if cls in SHIPPED]
    return sorted(names, key=lambda name: name != DEFAULT_LIST_POLICY)


def list_policy_names() -> list[str]:
    return sorted(_REGISTRY)


def register_list_policy(name: str, cls: type) -> None:
    """Make `cls` selectable by `name` (for plugins that want a short name)."""
    _check_policy_class(cls, name)
    if ":" in name or not name:
        raise EstimatorConfigError(f"LIST policy name {name!r} must be non-empty and contain no ':'")
    existing = _REGISTRY.get(name)
    if existing is not None and existing is not cls:
        raise EstimatorConfigError(f"LIST policy name {name!r} is already taken by {existing.__qualname__}")
    _REGISTRY[name] = cls


def _is_policy_instance(obj: Any) -> bool:
    return not inspect.isclass(obj) and callable(getattr(obj, "estimate", None))


def _check_policy_class(obj: Any, what: str) -> type:
    if not inspect.isclass(obj):
        raise EstimatorConfigError(f"LIST policy {what!r} is not a class (got {type(obj).__name__})")
    if not callable(getattr(obj, "estimate", None)):
        raise EstimatorConfigError(
            f"LIST policy {what!r} is not a LIST work policy: {obj.__qualname__} has no "
            "estimate(attrs, ctx, from_cache) method"
        )
    return obj


def _where_in_user_code(e: BaseException, module_name: str) -> str:
    """`file:line: ` of the innermost frame in the user's module (or of a SyntaxError): where
    their code went wrong, even when the exception itself was raised inside the library it called."""
    if isinstance(e, SyntaxError) and e.filename:
        return f"{e.filename}:{e.lineno}: "
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        return where_in(e, {spec.origin})
    tb = e.__traceback__
    last = None
    while tb is not None:  # no file known: the last frame that is neither the import system nor simapf
        filename = tb.tb_frame.f_code.co_filename
        if "importlib" not in filename and "simapf" not in filename:
            last = tb
        tb = tb.tb_next
    return f"{last.tb_frame.f_code.co_filename}:{last.tb_lineno}: " if last is not None else ""


def current_folder_importable() -> None:
    """A policy module in the folder simapf runs in imports, as a user of `python -m` expects,
    though simapf's own script lives elsewhere. Added last on sys.path, so it never changes
    which module simapf or a library imports; as "", which Python reads as the current folder
    whenever it imports, in worker processes (which start with this sys.path) too."""
    if "" not in sys.path:
        sys.path.append("")


def _import_class(path: str) -> type:
    module_name, _, attr_path = path.partition(":")
    if not module_name or not attr_path:
        raise EstimatorConfigError(f"LIST policy {path!r}: expected 'package.module:ClassName'")
    current_folder_importable()
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise EstimatorConfigError(f"LIST policy {path!r}: cannot import module {module_name!r}: {e} (simapf "
                                   "imports your policy from the current folder or PYTHONPATH)") from e
    except Exception as e:  # the user's module is broken: say where, as an error in their code
        raise EstimatorConfigError(f"LIST policy {path!r}: importing module {module_name!r} failed: "
                                   f"{_where_in_user_code(e, module_name)}{type(e).__name__}: {e}") from e
    obj: Any = module
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise EstimatorConfigError(
                f"LIST policy {path!r}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    return _check_policy_class(obj, path)


def resolve_list_policy_class(spec: str | type) -> type:
    """The class a name, import path or class stands for."""
    if inspect.isclass(spec):
        return _check_policy_class(spec, spec.__qualname__)
    if not isinstance(spec, str):
        raise EstimatorConfigError(
            f"LIST policy must be a name, 'package.module:ClassName' or a class, got {spec!r}")
    if ":" in spec:
        return _import_class(spec)
    cls = _REGISTRY.get(spec)
    if cls is None:
        raise EstimatorConfigError(
            f"unknown LIST policy {spec!r}; known: {', '.join(list_policy_names())}; "
            "or give your own class as 'package.module:ClassName'"
        )
    return cls


def make_list_policy(spec: str | type | Any = DEFAULT_LIST_POLICY, /, **params: Any) -> Any:
    """Build a LIST policy from a registered name, an import path, a class, or pass an instance through."""
    if _is_policy_instance(spec):
        if params:
            raise EstimatorConfigError(
                f"LIST policy {spec!r} is already built; parameters {sorted(params)} cannot apply")
        return spec
    cls = resolve_list_policy_class(spec)
    label = spec if isinstance(spec, str) else cls.__qualname__
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        try:
            sig.bind(**params)
        except TypeError as e:
            accepted = [
                p.name for p in sig.parameters.values()
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            raise EstimatorConfigError(
                f"LIST policy {label!r}: bad parameters {sorted(params)} ({e}); accepted: {accepted}"
            ) from None
    if cls not in SHIPPED:
        return construct(cls, params, policy_label(spec, cls))
    try:
        return cls(**params)
    except EstimatorConfigError:
        raise
    except (TypeError, ValueError) as e:
        raise EstimatorConfigError(f"LIST policy {label!r}: {e}") from e


def policy_estimate(policy: Any, spec: Any) -> Any:
    """The `estimate` to call for `policy` (built from `spec`): a shipped policy's own bound
    method; a user's, checked (`usercode.checked_estimate`)."""
    if type(policy) in SHIPPED:
        return policy.estimate
    return checked_estimate(policy, policy_label(spec, type(policy)))


__all__ = [
    "DEFAULT_LIST_POLICY",
    "ListWorkPolicy",
    "list_policy_names",
    "make_list_policy",
    "register_list_policy",
    "resolve_list_policy_class",
]
