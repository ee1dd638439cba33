"""The scenario file: one run of simapf, written down.

A scenario says which Kubernetes behaviour to assume (feature gates), what the apiserver is
(cores, concurrency, memory, GC, resource-model parameters), how APF is configured (bootstrap or
the cluster's own objects, the work-estimator policy), what the cluster holds (resources and
their objects), who talks to it (clients), what happens during the run (events) and how long
it runs. Every field has a default and a unit in its name (`_s` seconds, `_bytes` bytes,
`_per_s` per second); unknown fields are errors, since they are typos.

One module per part of the file: `server` (Kubernetes, the apiserver, APF, webhooks),
`inventory` (resources, CRDs), `clients`, `events`, and `scenario` (the run and the whole file);
`base` holds what they share. `docs/scenario-reference.md` is generated from them
(`python -m simapf.scenario.docs`), so their descriptions are the user's reference.
"""

from simapf.scenario.schema.base import MAX_INSTANCES, MAX_RATE_PER_S, StrictModel, parse_duration
from simapf.scenario.schema.clients import (
    CHECKSUMMED_DISCOVERY_CACHE, DISCOVERY_CACHE_FSYNC_S, Backoff, Client, ClientBase, ClientNetwork,
    ClientProcessing, ClosedLoopClient, DiscoveryClient, Identity, InformerClient, ListOptionsSpec,
    ListSpec, MutatorClient, OpenLoopClient, RateLimit, RequestTemplate, RetryPolicy, StartSpec,
    ThinkTime,
)  # fmt: skip
from simapf.scenario.schema.events import (
    APFConfigEvent, ClientGatesEvent, CrdInstallEvent, Event, EventBase, OutageEvent, PolicyEvent,
    RampEvent, RestartEvent,
)  # fmt: skip
from simapf.scenario.schema.inventory import (
    MAX_CRDS, MAX_OBJECT_BYTES, MAX_OBJECTS, UNSTRUCTURED_DECODED_RATIO, CrdGroup, Resource,
    SizeDistribution,
)  # fmt: skip
from simapf.scenario.schema.scenario import DEFAULT_MAX_REQUESTS, MAX_DURATION_S, MAX_SCRAPES, RunSpec, Scenario
from simapf.scenario.schema.server import (
    APF, AdmissionWebhook, Apiserver, Estimator, Etcd, FeatureGates, Kubernetes, LoadBalancer,
    PriorityLevelOverride, WebhookServiceTime,
)  # fmt: skip

__all__ = [
    "APF", "APFConfigEvent", "AdmissionWebhook", "Apiserver", "Backoff", "CHECKSUMMED_DISCOVERY_CACHE",
    "Client", "ClientBase", "ClientGatesEvent", "ClientNetwork", "ClientProcessing", "ClosedLoopClient",
    "CrdGroup", "CrdInstallEvent", "DEFAULT_MAX_REQUESTS", "DISCOVERY_CACHE_FSYNC_S", "DiscoveryClient",
    "Estimator", "Etcd", "Event", "EventBase", "FeatureGates", "Identity", "InformerClient", "Kubernetes",
    "ListOptionsSpec", "ListSpec", "LoadBalancer", "MAX_CRDS", "MAX_DURATION_S", "MAX_INSTANCES",
    "MAX_OBJECTS", "MAX_OBJECT_BYTES", "MAX_RATE_PER_S", "MAX_SCRAPES", "MutatorClient", "OpenLoopClient",
    "OutageEvent", "PolicyEvent", "PriorityLevelOverride", "RampEvent", "RateLimit", "RequestTemplate",
    "Resource", "RestartEvent", "RetryPolicy", "RunSpec", "Scenario", "SizeDistribution", "StartSpec",
    "StrictModel", "ThinkTime", "UNSTRUCTURED_DECODED_RATIO", "WebhookServiceTime", "parse_duration",
]  # fmt: skip
