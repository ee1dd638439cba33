"""The OpenAPI v2 document rebuilt on every CRD change, as kube-apiserver did before 1.28.

Before 1.28 the aggregator merged every CRD's spec into the whole /openapi/v2 document and
marshaled it again (JSON, then protobuf) whenever a CRD was created or changed, whether or
not anyone asked for it; since 1.28 it is built only when a client asks (kubernetes#118212).
One worker does it: a change while it is rebuilding makes one more rebuild when it is done,
so changes faster than rebuilds coalesce and the work stays at most one core. Each rebuild is
CPU proportional to the whole document's size (the model's JSON and protobuf encoding rates)
and allocates the new document, which becomes garbage at the next rebuild; the cost of
installing N CRDs one by one grows as N², the CPU spike of kubernetes#105932.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simapf.server.cpu import ProcessorSharing
    from simapf.server.memory import MemoryModel
    from simapf.server.params import ServerParams


class OpenAPIv2Rebuilds:
    __slots__ = ("eager", "spec_bytes", "core_s_per_byte", "alloc_multiplier", "cpu", "memory",
                 "busy", "dirty", "rebuilds", "core_s_total")  # fmt: skip

    def __init__(self, params: "ServerParams", cpu: "ProcessorSharing", memory: "MemoryModel") -> None:
        crds = params.crds
        c = params.request_cpu
        self.eager = crds.openapi_v2_eager
        self.spec_bytes = crds.openapi_builtin_bytes  # the published document, CRDs included
        self.core_s_per_byte = c.json_encode_core_s_per_byte + c.protobuf_encode_core_s_per_byte
        self.alloc_multiplier = crds.openapi_alloc_multiplier
        self.cpu = cpu
        self.memory = memory
        self.busy = False
        self.dirty = False
        self.rebuilds = 0
        self.core_s_total = 0.0

    def crds_changed(self, spec_bytes: float, rebuild: bool = True) -> None:
        """CRDs adding `spec_bytes` to the document were created now (`rebuild` False: while the
        process is down, or before it started; it will publish them when it starts)."""
        self.spec_bytes += spec_bytes
        if not self.eager or not rebuild:
            return
        if self.busy:
            self.dirty = True
        else:
            self._start()

    def _start(self) -> None:
        self.busy = True
        self.dirty = False
        assist = self.memory.allocate(self.alloc_multiplier * self.spec_bytes)
        if assist < 0.0:
            return  # the allocation killed the process
        work = self.core_s_per_byte * self.spec_bytes
        self.core_s_total += work
        self.cpu.add(work + assist, self._done)

    def _done(self, _arg: object) -> None:
        self.busy = False
        self.rebuilds += 1
        if self.dirty:
            self._start()

    def process_died(self) -> None:
        """The rebuild under way died with the process (its CPU job is dropped)."""
        self.busy = False
        self.dirty = False
