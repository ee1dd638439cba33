"""What happens during a run: outages, restarts, load ramps, policy and configuration changes."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from simapf.scenario.schema.base import MAX_INSTANCES, Integer, Seconds, StrictModel
from simapf.scenario.schema.server import Estimator, PriorityLevelOverride


class EventBase(StrictModel):
    at_s: Seconds = Field(..., ge=0, description="When it happens, in seconds from the start of the run.")


class OutageEvent(EventBase):
    """The network between clients and the apiserver fails: requests and watches break."""

    kind: Literal["outage"] = Field(description="outage: this kind of event.")
    duration_s: Seconds = Field(..., gt=0, description="How long the network stays down.")
    relist: Literal["auto", "always", "never"] = Field(
        "auto",
        description=(
            "Whether watches can resume afterwards. auto: they resume when the outage was shorter than the "
            "watch cache's history (75 s), else the server answers 410 Gone and informers relist. always / never force it."
        ),
    )


class RestartEvent(EventBase):
    """An apiserver process is killed; it comes back after apiserver.restart_s, its caches empty."""

    kind: Literal["restart"] = Field(description="restart: this kind of event.")
    replica: Integer = Field(0, ge=0, description="Which apiserver replica is killed (from 0).")


class RampEvent(EventBase):
    """Change a client's instance count linearly over a time."""

    kind: Literal["ramp"] = Field(description="ramp: this kind of event.")
    client: str = Field(..., description="The client's name.")
    to_count: Integer = Field(..., ge=0, le=MAX_INSTANCES, description="Instances at the end (at most 100,000).")
    over_s: Seconds = Field(0.0, ge=0, description="Duration of the ramp (0 = at once).")


class PolicyEvent(EventBase):
    """Switch the work estimator's LIST policy."""

    kind: Literal["policy"] = Field(description="policy: this kind of event.")
    estimator: Estimator = Field(..., description="The new estimator.")


class APFConfigEvent(EventBase):
    """Replace the APF configuration (levels of the old one drain)."""

    kind: Literal["apf_config"] = Field(description="apf_config: this kind of event.")
    config: str = Field("bootstrap", description="As apf.config.")
    priority_levels: dict[str, PriorityLevelOverride] = Field(default_factory=dict, description="As apf.priority_levels.")


class ClientGatesEvent(EventBase):
    """Change client-side behaviour, as a rolling upgrade of the clients would."""

    kind: Literal["client_gates"] = Field(description="client_gates: this kind of event.")
    WatchListClient: bool = Field(..., description="New value of the client-go WatchListClient gate.")


class CrdInstallEvent(EventBase):
    """Create a group of CRDs (from `crds`) one after another: the apiserver builds each one's
    serving structures, and discovery has their group-versions to walk."""

    kind: Literal["crd_install"] = Field(description="crd_install: this kind of event.")
    crds: str = Field(..., description="The name of a group in `crds`; it is not installed before this event.")
    over_s: Seconds = Field(0.0, ge=0, description="Time to create them all, one after another at even intervals (0 = at once).")


Event = Annotated[
    Union[OutageEvent, RestartEvent, RampEvent, PolicyEvent, APFConfigEvent, ClientGatesEvent, CrdInstallEvent],
    Field(discriminator="kind"),
]
