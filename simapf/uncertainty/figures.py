"""A run's headline figures: where each stands in the summary, its name and its kind.

The same names are a sweep row's columns (`simapf.sweeps.measure.flatten`), so a figure of a
run, of a sweep and of an interval is one thing. Each figure's kind says which validation rows
speak for its error (`simapf.uncertainty.model_error`).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, NamedTuple

from simapf.schema.summary import Interval, Section, Summary, typed


class Figure(NamedTuple):
    key: str  # its name: a sweep column, e.g. peak_rss_bytes or p99_s/global-default/list
    kind: str  # memory, cpu, rejected, latency, oom_kills
    holder: Section  # the summary's section that holds it
    field: str  # its field there; its interval goes beside it as <field>_interval
    path: tuple[str | int, ...]  # where the holder stands in summary.json, e.g. ("clients", 2, "by_verb", "list")

    @property
    def value(self) -> float:
        return float(getattr(self.holder, self.field))

    @property
    def interval(self) -> Interval | None:
        """The interval `--uncertainty` put beside it, or None."""
        return self.holder.interval(self.field)


LATENCY_STATS = ("mean_s", "p50_s", "p90_s", "p99_s")
# Fields of the summary that are headline figures, and their kinds.
SCALARS = (
    ("memory", "peak_rss_bytes", "peak_rss_bytes", "memory"),
    ("memory", "scraped_peak_rss_bytes", "scraped_peak_rss_bytes", "memory"),
    ("memory", "peak_heap_inuse_bytes", "peak_heap_inuse_bytes", "memory"),
    ("cpu", "mean_cores", "mean_cores", "cpu"),
    ("process", "oom_kills", "oom_kills", "oom_kills"),
    ("requests", "rejected_share", "rejected_share", "rejected"),
)


def headline_figures(summary: Summary | Mapping[str, Any]) -> Iterator[Figure]:
    """Every headline figure of a run's summary (those present in it)."""
    s = typed(summary)
    for section, field, key, kind in SCALARS:
        holder = getattr(s, section)
        if getattr(holder, field) is not None:
            yield Figure(key, kind, holder, field, (section,))
    for i, row in enumerate(s.latency):
        for stat in LATENCY_STATS:
            if getattr(row, stat) is not None:
                yield Figure(f"{stat}/{row.priority_level}/{row.verb}", "latency", row, stat, ("latency", i))
    for i, client in enumerate(s.clients):
        for verb, by_verb in client.by_verb.items():
            for stat in LATENCY_STATS:
                if getattr(by_verb, stat) is not None:
                    yield Figure(f"client_{stat}/{client.client}/{verb}", "latency", by_verb, stat,
                                 ("clients", i, "by_verb", verb))  # fmt: skip


def figure_values(summary: Summary | Mapping[str, Any]) -> dict[str, float]:
    return {f.key: f.value for f in headline_figures(summary)}


def kind_of(key: str) -> str | None:
    """The kind of a headline figure by its name (a sweep column); None if it is none."""
    for _section, _field, name, kind in SCALARS:
        if key == name:
            return kind
    stat = key.split("/", 1)[0].removeprefix("client_")
    return "latency" if "/" in key and stat in LATENCY_STATS else None
