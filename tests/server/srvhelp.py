"""Small drivers shared by the server-model tests (no APF: requests go straight to the model)."""

from __future__ import annotations

from simapf.apf.types import ListOptions, RequestAttributes
from simapf.engine.environment import Environment
from simapf.server import (
    Encoding,
    ResourceModel,
    RequestCost,
    ResponseShape,
    ServerParams,
    ServerSnapshot,
    ServingPath,
    sample_every,
)

S = 1_000_000_000  # ns per second

# An ordinary authenticated user's LIST: the bootstrap FlowSchemas send it to global-default.
LIST_USER = RequestAttributes(
    user="lister", groups=("system:authenticated",), verb="list", resource="configmaps",
    namespace="bench", list_options=ListOptions(resource_version="0"),
)  # fmt: skip


def open_loop(
    params: ServerParams,
    rate_per_s: float,
    secs: float,
    cost: RequestCost,
    *,
    stop_after_s: float | None = None,
    sample_ns: int = 50_000_000,
) -> tuple[ResourceModel, list[ServerSnapshot]]:
    """Start `cost` requests at a fixed rate for `secs` simulated seconds."""
    env = Environment()
    model = ResourceModel(env.clock, params)
    gap = int(S / rate_per_s)
    stop = None if stop_after_s is None else int(stop_after_s * S)

    def driver():
        while stop is None or env.now < stop:
            model.start(cost, lambda t: None)
            yield env.timeout(gap)

    env.process(driver())
    snaps: list[ServerSnapshot] = []
    sample_every(model, sample_ns, snaps.append)
    env.run(until=int(secs * S))
    return model, snaps


def cost(path: ServingPath, nbytes: float, objects: int, streaming: bool = False,
         encoding: Encoding = Encoding.PROTOBUF) -> RequestCost:  # fmt: skip
    """A LIST's cost. Protobuf by default: its whole response is one buffer of its exact size
    from the allocator pool, where a JSON one grows encoding/json's pooled buffers by doubling
    (simapf.server.pool, tested in test_encode_pool.py)."""
    return RequestCost(path, ResponseShape(nbytes, objects, encoding), streaming)
