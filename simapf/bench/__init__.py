"""The real bench: a scenario run on kube-apiserver and etcd built from upstream's Go modules.

`simapf measure SCENARIO --out DIR` (or `simapf.bench.measure`) is the simulation's twin: the
same scenario file, the same output layout, read by the same tools. `build` makes the binaries,
`plan` says how a scenario runs here (or which field cannot), `supervisor` and `cgroups` own the
processes and their container limits, `sampler` reads them, `measure` runs one replication and
`observe` turns its readings into a `Result`; `run` ties them together, `check` sets a
measurement beside the model's prediction.
"""

from simapf.bench.run import Measurement, measure, write

__all__ = ["Measurement", "measure", "write"]
