"""What a run's summary counts: LISTs by serving path (a watch only when it is a WatchList), and
memory in whole bytes."""

from __future__ import annotations

import json

import pytest

import simapf
from builders import informer, open_loop, scenario
from simapf.simulation.collect import is_bytes_key


def _summary(*clients, **gates) -> dict:
    sc = scenario(*clients, duration_s=20, kubernetes={"feature_gates": gates},
                  events=[{"at_s": 5, "kind": "outage", "duration_s": 2}])
    return simapf.run(simapf.load_scenario(sc)).summary


def _by_path(summary: dict) -> dict:
    return {path: served["requests"] for path, served in summary["lists"]["by_path"].items()}


def test_an_informers_watch_after_its_list_is_not_a_list():
    summary = _summary(informer(count=5), WatchListClient=False)
    by_path = _by_path(summary)
    assert by_path.get("watchlist_stream", 0) == 0, by_path
    assert sum(by_path.values()) == 5  # one LIST each, then a watch from its resourceVersion


def test_a_watch_list_is_counted_where_it_was_served():
    by_path = _by_path(_summary(informer(count=5), WatchListClient=True))
    assert by_path == {"watchlist_stream": 5}


@pytest.mark.parametrize("gates", [{"WatchListClient": False}, {"WatchListClient": True}])
def test_memory_is_in_whole_bytes(gates):
    summary = _summary(informer(count=5), **gates)

    def amounts(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in ("scenario", "provenance"):
                    yield from amounts(v, k)
        elif isinstance(value, list):
            for v in value:
                yield from amounts(v, key)
        elif is_bytes_key(key):
            yield key, value

    found = list(amounts(summary))
    assert {"peak_rss_bytes", "bytes", "scraped_peak_rss_bytes_until_next_event"} <= {k for k, _ in found}
    assert [(k, v) for k, v in found if v is not None and not isinstance(v, int)] == []
    assert json.loads(json.dumps(summary))["memory"]["peak_rss_bytes"] == summary["memory"]["peak_rss_bytes"]


def test_the_priority_levels_count_the_requests_the_summary_counts():
    # LISTs of 2,000 objects of 20 KiB keep requests executing when the run ends: the levels'
    # table counts the requests that ended, as the summary does, not those still executing.
    big = {"name": "configmaps", "count": 2000, "namespaces": 4, "object_size": {"mean_bytes": 20480}}
    sc = scenario(open_loop(rate_per_s=40, request={"verb": "list", "resource": "configmaps"}), informer(count=3),
                  duration_s=10, resources=[big])  # fmt: skip
    result = simapf.run(simapf.load_scenario(sc))
    ended = result.summary["requests"]["total"]
    still = sum(c["in_flight_at_end"] for c in result.summary["clients"])
    assert still > 0  # the case this is about
    assert result.levels["requests"].sum() == ended
    assert (result.levels["requests"] >= result.levels["rejected"]).all()
