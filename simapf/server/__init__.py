"""The apiserver as a resource model: CPU under processor sharing, etcd, memory, the Go GC, OOM.

Driven per request by callbacks (`ResourceModel.start`), not a SimPy process per request.
Time is integer nanoseconds (the SimPy clock); bytes and core-seconds are floats.
See docs/resource-model.md for the equations and which numbers are sourced.
"""

from simapf.server.costs import RequestPlan, compute_plan
from simapf.server.cpu import ProcessorSharing
from simapf.server.etcd import EtcdModel
from simapf.server.gc import GoGC
from simapf.server.memory import MemoryModel
from simapf.server.model import CachedResource, ResourceModel, ServerSnapshot, sample_every
from simapf.server.params import FeatureGates, ServerParams
from simapf.server.paths import (
    Encoding,
    InvalidListOptions,
    RequestCost,
    ResponseShape,
    ServingPath,
    is_streaming_encoded,
    plan_request,
    serving_path,
)
from simapf.server.process import ProcessState, ServerProcessState

__all__ = [
    "CachedResource",
    "Encoding",
    "EtcdModel",
    "FeatureGates",
    "GoGC",
    "InvalidListOptions",
    "MemoryModel",
    "ProcessState",
    "ProcessorSharing",
    "RequestCost",
    "RequestPlan",
    "ResourceModel",
    "ResponseShape",
    "ServerParams",
    "ServerProcessState",
    "ServerSnapshot",
    "ServingPath",
    "compute_plan",
    "is_streaming_encoded",
    "plan_request",
    "sample_every",
    "serving_path",
]
