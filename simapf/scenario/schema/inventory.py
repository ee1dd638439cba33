"""What the cluster holds: resources and their objects, and CustomResourceDefinitions."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from simapf.scenario.schema.base import MAX_NAME_LENGTH, Integer, Number, StrictModel
from simapf.server.params import Bytes


# Bounds of the inputs a run is built from, each a one-line error beyond it: simapf keeps one
# size per object.
MAX_OBJECTS = 50_000_000
MAX_NAMESPACES = 1_000_000  # simapf keeps each namespace's objects apart
MAX_OBJECT_BYTES = 2**31  # gRPC's largest message: no larger object can be read back


class SizeDistribution(StrictModel):
    """Sizes of objects as stored in etcd."""

    mean_bytes: Bytes = Field(
        ..., le=MAX_OBJECT_BYTES,
        description="Mean object size (bytes or a quantity like 100Ki; at most 2 GiB, gRPC's largest message).",
    )
    distribution: Literal["constant", "lognormal", "exponential"] = Field(
        "constant", description="constant, lognormal (with sigma) or exponential."
    )
    sigma: Number = Field(0.5, ge=0, description="lognormal: standard deviation of log(size).")

    @field_validator("mean_bytes")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be positive")
        return v


# Custom resources are decoded into Unstructured: about 5.2x their JSON (kubernetes#142062).
UNSTRUCTURED_DECODED_RATIO = 5.2


class Resource(StrictModel):
    """One API resource and the objects it holds."""

    name: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH,
        description="Resource name as in URLs (pods, secrets, widgets; at most 253 characters).",
    )
    group: str = Field("", max_length=MAX_NAME_LENGTH, description="API group ('' = core; at most 253 characters).")
    version: str = Field("v1", description="API version (for discovery).")
    namespaced: bool = Field(True, description="Namespaced or cluster-scoped.")
    count: Integer = Field(
        ..., ge=0, le=MAX_OBJECTS,
        description="Objects at the start of the run (mutators add and delete some; at most 50,000,000: simapf keeps each one's size).",
    )
    object_size: SizeDistribution = Field(..., description="A size is drawn for each object, at the start and on every create.")
    namespaces: Integer = Field(
        1, ge=1, le=MAX_NAMESPACES,
        description="Namespaces the objects are spread over evenly (ns-0, ns-1, ...; at most 1,000,000).",
    )
    watch_cache: bool = Field(True, description="Whether the apiserver keeps a watch cache of it.")
    converts: bool = Field(
        False, description="Whether internal-to-external list conversion copies objects (Pods, Nodes: true; ConfigMaps, Secrets, CRs: false)."
    )
    decoded_size_multiplier: Number | None = Field(
        None, gt=0,
        description=(
            "Decoded Go size of one of its objects per byte stored in etcd, in the watch cache and in a LIST "
            "decoded from etcd. null = by kind: ConfigMaps and Secrets 1 (their bulk is Data values, held as "
            "the same bytes: map[string]string, map[string][]byte); custom resources (a group that is not "
            "Kubernetes') 5.2, held as Unstructured (kubernetes#142062); other built-in types the resource "
            "model's watch_cache.decoded_size_multiplier."
        ),
    )

    gzip_ratio: Number | None = Field(
        None, gt=0, le=1.1,
        description=(
            "Size of a gzip-compressed response of its objects per byte of the plain one (what a client "
            "link carries when responses are compressed). null = 0.15, a 5000-node cluster's Pods "
            "(kubernetes#138327). Random bytes do not compress (1.0); random base64 text, as test objects "
            "often hold, ~0.75 (6 bits of entropy in 8)."
        ),
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", v):
            raise ValueError("must be a lower-case resource name like 'pods'")
        return v

    @property
    def decoded_ratio(self) -> float | None:
        """`decoded_size_multiplier`, or its default by kind (None: the resource model's)."""
        if self.decoded_size_multiplier is not None:
            return self.decoded_size_multiplier
        if self.group == "" and self.name in ("configmaps", "secrets"):
            return 1.0
        if "." in self.group and not self.group.endswith("k8s.io"):
            return UNSTRUCTURED_DECODED_RATIO
        return None

    @property
    def key(self) -> str:
        return f"{self.name}.{self.group}" if self.group else self.name


# --------------------------------------------------------------------------------------------
# CustomResourceDefinitions

# A CRD is one etcd object, written whole: no larger than etcd's default request limit
# (--max-request-bytes, 1.5 MiB).
MAX_CRD_OBJECT_BYTES = 1.5 * 2**20
MAX_CRDS = 100_000


class CrdGroup(StrictModel):
    """CustomResourceDefinitions installed together (a provider's or an operator's): the heap
    their serving structures hold before any custom object exists (the resource model's `crds`
    parameters), and the group-versions discovery walks. Their custom objects, if any, are
    `resources` like any other."""

    name: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH,
        description="A name for the group (a crd_install event refers to it; at most 253 characters).",
    )
    count: Integer = Field(..., ge=1, le=MAX_CRDS, description="How many CRDs.")
    served_versions: Integer = Field(1, ge=1, le=32, description="Versions each CRD serves: each has its own storage and schema.")
    schema_bytes: Bytes = Field(16 * 1024, description="Size of one version's openAPIV3Schema, as JSON (bytes or a quantity).")
    api_groups: Integer | None = Field(
        None, ge=1, le=MAX_CRDS,
        description="API groups the CRDs span: discovery walks api_groups x served_versions group-versions. null: one per CRD."
    )

    @model_validator(mode="after")
    def _fits(self) -> "CrdGroup":
        if self.schema_bytes <= 0:
            raise ValueError("schema_bytes: must be positive")
        if self.schema_bytes * self.served_versions > MAX_CRD_OBJECT_BYTES:
            raise ValueError(
                f"schema_bytes x served_versions is {self.schema_bytes * self.served_versions:,.0f} bytes: a CRD is "
                "one etcd object, at most 1.5 MiB (etcd's --max-request-bytes)"
            )
        if self.api_groups is not None and self.api_groups > self.count:
            raise ValueError(f"api_groups: {self.api_groups} API groups for {self.count} CRDs")
        return self

    @property
    def group_count(self) -> int:
        return self.api_groups if self.api_groups is not None else self.count
