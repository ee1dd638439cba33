"""What the APF core sees of a request, and what it decides about its cost.

`RequestAttributes` mirrors the parts of upstream's `RequestInfo` and `user.Info` that
classification and work estimation read. `WorkEstimate` is upstream's `WorkEstimate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Final

NS_PER_S: Final = 1_000_000_000


class PickledByFields:
    """Pickled and copied by calling the class again with the fields: a compiled frozen
    dataclass (simapf.compiled_core) cannot have its fields set after it is made, which
    pickle's and copy's default ways do."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ListOptions(PickledByFields):
    """The list/watch query parameters that change serving path and cost."""

    resource_version: str | None = None  # None = not set ("" in upstream terms)
    resource_version_match: str = ""  # "", "NotOlderThan", "Exact"
    limit: int = 0
    continue_token: str = ""
    label_selector: str = ""
    field_selector: str = ""
    send_initial_events: bool | None = None
    pretty: bool = False  # ?pretty=true: JSON written indented, as one document (never streamed)

    def __hash__(self) -> int:
        # The hash dataclass would write (every field), here so that the compiled core compiles
        # it too: the cluster's cost cache hashes a request's options once per request.
        return hash((self.resource_version, self.resource_version_match, self.limit, self.continue_token,
                     self.label_selector, self.field_selector, self.send_initial_events, self.pretty))


@dataclass(frozen=True, slots=True)
class RequestAttributes(PickledByFields):
    """One request as APF sees it: who sent it and what it asks for.

    `verb` is the RequestInfo verb (get, list, watch, create, update, patch, delete,
    deletecollection, ...) for resource requests, or the lower-case HTTP method for
    non-resource requests.
    """

    user: str
    groups: tuple[str, ...] = ()
    verb: str = "get"
    is_resource_request: bool = True
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only
    list_options: ListOptions = field(default_factory=ListOptions)


@dataclass(frozen=True, slots=True)
class WorkEstimate(PickledByFields):
    """Seats a request occupies: `max_seats` from dispatch until release.

    `additional_latency_ns` is how long the final seats stay held after the handler returns.
    """

    initial_seats: int
    final_seats: int = 0
    additional_latency_ns: int = 0

    @property
    def max_seats(self) -> int:
        return self.initial_seats if self.initial_seats >= self.final_seats else self.final_seats
