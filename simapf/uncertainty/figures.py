"""A run's headline figures: where each stands in the summary, its name and its kind.

The same names are a sweep row's columns (`simapf.sweeps.measure.flatten`), so a figure of a
run, of a sweep and of an interval is one thing. Each figure's kind says which validation rows
speak for its error (`simapf.uncertainty.model_error`).
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple


class Figure(NamedTuple):
    key: str  # its name: a sweep column, e.g. peak_rss_bytes or p99_s/global-default/list
    kind: str  # memory, cpu, rejected, latency, oom_kills
    holder: dict[str, Any]  # the summary's mapping that holds it
    field: str  # its field there; its interval goes beside it as <field>_interval


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


def headline_figures(summary: dict[str, Any]) -> Iterator[Figure]:
    """Every headline figure of a run's summary (those present in it)."""
    for section, field, key, kind in SCALARS:
        holder = summary.get(section) or {}
        if holder.get(field) is not None:
            yield Figure(key, kind, holder, field)
    for row in summary.get("latency", []):
        for stat in LATENCY_STATS:
            if row.get(stat) is not None:
                yield Figure(f"{stat}/{row['priority_level']}/{row['verb']}", "latency", row, stat)
    for client in summary.get("clients", []):
        for verb, row in client.get("by_verb", {}).items():
            for stat in LATENCY_STATS:
                if row.get(stat) is not None:
                    yield Figure(f"client_{stat}/{client['client']}/{verb}", "latency", row, stat)


def figure_values(summary: dict[str, Any]) -> dict[str, float]:
    return {f.key: float(f.holder[f.field]) for f in headline_figures(summary)}


def kind_of(key: str) -> str | None:
    """The kind of a headline figure by its name (a sweep column); None if it is none."""
    for _section, _field, name, kind in SCALARS:
        if key == name:
            return kind
    stat = key.split("/", 1)[0].removeprefix("client_")
    return "latency" if "/" in key and stat in LATENCY_STATS else None
