"""Counting open watches, so a mutation can be charged for the events it fans out (§5.6).

Mirrors upstream's `watchTracker` (k8s.io/apiserver `pkg/util/flowcontrol/watch_tracker.go`):
watches are grouped by (apiGroup, resource, namespace, name), selectors ignored, except that a
pod watch pinned to one node by a `spec.nodeName` field selector is not counted at all. Kubelets
hold one such watch each, and a pod change wakes only the one on its node, so counting them
would make every pod write look as if thousands of watchers cared.
"""

from __future__ import annotations

from collections.abc import Mapping

from simapf.apf.types import RequestAttributes

WatchKey = tuple[str, str, str, str]  # (api_group, resource, namespace, name)

# Read-only verbs produce no watch events.
READ_ONLY_VERBS = frozenset({"get", "list", "watch", "proxy"})

# Resources whose watch cache has an index that upstream's tracker knows about, and the
# indexed field. metadata.name indexes need no entry: RequestInfo.Name already carries them.
DEFAULT_INDEXES: Mapping[str, str] = {"pods": "spec.nodeName"}


def field_selector_exact_value(field_selector: str, field: str) -> str | None:
    """The value `field` is pinned to by `=` or `==` in an AND-ed field selector, else None.

    Enough of the fields-selector grammar for the tracker: terms are comma-separated and a
    backslash escapes the next character; `!=` pins nothing.
    """
    if not field_selector or field not in field_selector:
        return None
    for term in _split_unescaped(field_selector, ","):
        if not term:
            continue
        for op in ("!=", "==", "="):
            i = _find_unescaped(term, op)
            if i >= 0:
                if op != "!=" and term[:i] == field:
                    return _unescape(term[i + len(op):])
                break
    return None


def _find_unescaped(s: str, sub: str) -> int:
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s.startswith(sub, i):
            return i
        i += 1
    return -1


def _split_unescaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    start = 0
    while True:
        i = _find_unescaped(s[start:], sep)
        if i < 0:
            parts.append(s[start:])
            return parts
        parts.append(s[start:start + i])
        start += i + len(sep)


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            i += 1
        out.append(s[i])
        i += 1
    return "".join(out)


class WatchTracker:
    """Open watches on this apiserver, by (api_group, resource, namespace, name).

    Counts are local to one apiserver, as upstream's are.
    """

    __slots__ = ("_counts", "_indexes")

    def __init__(self, indexes: Mapping[str, str] | None = None) -> None:
        self._counts: dict[WatchKey, int] = {}
        self._indexes = dict(DEFAULT_INDEXES if indexes is None else indexes)

    def register(self, attrs: RequestAttributes) -> WatchKey | None:
        """Count a WATCH that starts executing; returns the token to pass to `unregister`.

        Returns None (nothing counted) for anything but a watch, and for a watch on an indexed
        resource whose field selector pins the indexed field to a non-empty value. Upstream keys
        the index by resource name alone, whatever the group; so does this.
        """
        if attrs.verb != "watch":
            return None
        field = self._indexes.get(attrs.resource)
        if field is not None and field_selector_exact_value(attrs.list_options.field_selector, field):
            return None
        key = (attrs.api_group, attrs.resource, attrs.namespace, attrs.name)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1
        return key

    def unregister(self, token: WatchKey | None) -> None:
        """Forget a watch registered earlier; None (an uncounted watch) is a no-op."""
        if token is None:
            return
        counts = self._counts
        n = counts.get(token, 0) - 1
        if n > 0:
            counts[token] = n
        elif n == 0:
            del counts[token]
        else:
            raise KeyError(f"unregister of a watch that is not registered: {token}")

    def add(self, api_group: str, resource: str, namespace: str = "", name: str = "", n: int = 1) -> None:
        """Add `n` watches (negative to remove) under one key directly, bypassing the index rule.

        For seeding a steady population of informers without building a request for each.
        """
        key = (api_group, resource, namespace, name)
        total = self._counts.get(key, 0) + n
        if total < 0:
            raise ValueError(f"watch count for {key} would become negative ({total})")
        if total:
            self._counts[key] = total
        else:
            self._counts.pop(key, None)

    def count(self, api_group: str, resource: str, namespace: str = "", name: str = "") -> int:
        """Watches registered under exactly this key."""
        return self._counts.get((api_group, resource, namespace, name), 0)

    def count_for(self, attrs: RequestAttributes) -> int:
        """Watches that could care about a mutation described by `attrs` (§5.6).

        Watches on the whole resource, plus on the object's namespace if it has one, plus on the
        object itself if the request names it. A create usually carries no name, so it sees only
        the first two terms, as upstream.
        """
        if attrs.verb in READ_ONLY_VERBS:
            return 0
        counts = self._counts
        if not counts:
            return 0
        group = attrs.api_group
        resource = attrs.resource
        ns = attrs.namespace
        total = counts.get((group, resource, "", ""), 0)
        if ns:
            total += counts.get((group, resource, ns, ""), 0)
        if attrs.name:
            total += counts.get((group, resource, ns, attrs.name), 0)
        return total

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def snapshot(self) -> dict[WatchKey, int]:
        return dict(self._counts)
