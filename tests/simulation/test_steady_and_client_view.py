"""Peaks that mean what a user means: memory and CPU over a steady-state window that leaves out
the start-up ramp (`run.steady_state_from_s`), and latency and errors per request class as the
client sees them (from its first attempt, token-bucket waits and 429 retries included, to the
final response; APF queue time-outs are errors)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import simapf
from simapf.errors import ConfigError
from simapf.simulation.collect import CLIENT_LATENCY_COLUMNS
from simapf.simulation.runner import Simulation
from simapf.scenario.schema import OpenLoopClient
from simapf.simulation.summary_text import format_summary
from simapf.workload.clientgo import CLIENT_OUTCOMES
from simapf.outputs.rundir import write_run

CONFIGMAPS = {"name": "configmaps", "count": 100, "namespaces": 4, "object_size": {"mean_bytes": 1024}}
BIG_CONFIGMAPS = {"name": "configmaps", "count": 2000, "namespaces": 1, "object_size": {"mean_bytes": 10240}}
# 120 MB of Secrets: enough for the start-up LIST storm to be the run's peak of RSS and heap
# (Secrets decode at their stored size, so a storm of 20 KiB ones no longer out-peaked the
# readers' GC sawtooth).
SECRETS = {"name": "secrets", "count": 3000, "namespaces": 3, "object_size": {"mean_bytes": 40960}}
LIST_NS0 = {"verb": "list", "resource": "configmaps", "namespace": "ns-0"}
# The open-loop clients here act on each response as it arrives (no client-side decoding time),
# so every answer the apiserver gave before the end is counted, and nothing else delays retries.
NO_PROCESSING = (
    {"processing": {"per_response_s": 0, "per_object_s": 0, "per_byte_s": 0}}
    if "processing" in OpenLoopClient.model_fields else {}
)  # fmt: skip


def scenario(*clients: dict, duration_s: float, resources: list[dict], run: dict | None = None, **extra) -> dict:
    return {
        "name": "steady-and-client-view",
        "run": {"duration_s": duration_s, "seed": 1, "scrape_interval_s": 1.0, **(run or {})},
        "resources": resources, "clients": list(clients), **extra,
    }  # fmt: skip


def open_loop(name: str, rate_per_s: float, request: dict, **kw) -> dict:
    return {"name": name, "kind": "open_loop", "identity": {"user": "user-{i}"}, "rate_per_s": rate_per_s,
            "request": request, **NO_PROCESSING, **kw}  # fmt: skip


def tiny_global_default(**queuing) -> dict:
    """global-default (where plain users land) with a few seats it cannot borrow beyond."""
    return {"priority_levels": {"global-default": {
        "nominal_concurrency_shares": 1, "lendable_percent": 0, "borrowing_limit_percent": 0,
        "queues": 1, "hand_size": 1, **queuing}}}  # fmt: skip


def client_row(result, client: str, verb: str) -> pd.Series:
    t = result.client_latency
    rows = t[(t["client"] == client) & (t["verb"] == verb)]
    assert len(rows) == 1, t
    return rows.iloc[0]


def server_row(result, level: str, verb: str) -> pd.Series:
    t = result.latency
    rows = t[(t["priority_level"] == level) & (t["verb"] == verb)]
    assert len(rows) == 1, t
    return rows.iloc[0]


# ------------------------------------------------------------------------ steady state


def start_up_storm(**run) -> dict:
    """50 informers LIST big Secrets at the start (the transient: JSON, whose streamed encoder
    copies every item before 1.37), then readers ramp up 2 -> 20 over [10 s, 30 s]: steady work
    that allocates, so the GC and scavenger give memory back."""
    informers = {"name": "controllers", "kind": "informer", "count": 50, "resource": "secrets", "encoding": "json",
                 "identity": {"service_account": "apps/controller-{i}"}, "start": {"spread_s": 2.0}}  # fmt: skip
    readers = {"name": "users", "kind": "closed_loop", "count": 2, "identity": {"user": "user-{i}"},
               "think_time": {"mean_s": 0.2, "distribution": "constant"}, "request": LIST_NS0}  # fmt: skip
    return scenario(
        informers, readers, duration_s=120.0, resources=[SECRETS, CONFIGMAPS], run=run,
        kubernetes={"version": "1.36", "feature_gates": {"WatchListClient": False}},
        events=[{"kind": "ramp", "at_s": 10.0, "client": "users", "to_count": 20, "over_s": 20.0}],
    )  # fmt: skip


@pytest.fixture(scope="module")
def storm():
    return simapf.run(start_up_storm())


def test_the_steady_state_peak_leaves_the_start_up_transient_out(storm):
    m, c = storm.summary["memory"], storm.summary["cpu"]
    assert m["steady_state_from_s"] == 60.0  # null: the second half of the run
    rss = storm.metric("process_resident_memory_bytes")
    heap = storm.metric("go_memstats_heap_inuse_bytes")
    window = rss[rss.index >= 60.0]
    assert rss.idxmax() <= 30.0  # the start-up (the LIST storm, the readers' ramp) holds the run's peak ...
    assert m["peak_rss_steady_bytes"] < m["peak_rss_bytes"]  # ... and the steady state's is lower
    # The scraped peaks are the highest scrape; the true ones, followed by the model, at least that.
    assert m["scraped_peak_rss_steady_bytes"] == window.max()
    assert m["peak_rss_steady_bytes"] >= window.max() * (1 - 1e-12)  # but for float rounding
    assert m["mean_rss_steady_bytes"] == pytest.approx(window.mean(), rel=1e-12)
    assert m["scraped_peak_heap_steady_bytes"] == heap[heap.index >= 60.0].max()
    assert m["peak_heap_steady_bytes"] >= heap[heap.index >= 60.0].max()
    assert m["peak_heap_steady_bytes"] < m["peak_heap_inuse_bytes"]
    assert m["scraped_peak_rss_bytes"] == rss.max() <= m["peak_rss_bytes"] * (1 + 1e-12)
    cpu = storm.metric("process_cpu_seconds_total")
    assert c["mean_cores_steady"] == pytest.approx((cpu.iloc[-1] - cpu.loc[60.0]) / 60.0, rel=1e-9)
    assert c["mean_cores_steady"] < c["mean_cores"]  # the storm's CPU is left out too
    text = format_summary(storm.summary)
    assert f"steady state from 60 s: {m['peak_rss_steady_bytes'] / 1e6:,.0f} MB" in text
    assert f"mean {m['mean_rss_steady_bytes'] / 1e6:,.0f} MB" in text


def test_steady_state_from_s_sets_the_window(storm):
    r = simapf.run(start_up_storm(steady_state_from_s=2.5))
    m = r.summary["memory"]
    assert m["steady_state_from_s"] == 2.5
    rss = r.metric("process_resident_memory_bytes")
    assert m["scraped_peak_rss_steady_bytes"] == rss[rss.index >= 2.5].max()
    assert m["peak_rss_steady_bytes"] >= rss[rss.index >= 2.5].max() * (1 - 1e-12)
    assert m["peak_rss_steady_bytes"] > storm.summary["memory"]["peak_rss_steady_bytes"]  # the storm is in it
    # The CPU counter is read when the window starts, between two scrapes: the mean lies between
    # what the scrapes either side of it would give.
    cpu = r.metric("process_cpu_seconds_total")
    mean = r.summary["cpu"]["mean_cores_steady"]
    assert (cpu.iloc[-1] - cpu.loc[3.0]) / 117.5 < mean < (cpu.iloc[-1] - cpu.loc[2.0]) / 117.5


@pytest.mark.parametrize("value, fragment", [
    ("300", "is not before the run ends"), ("120", "is not before the run ends"),
    ("-1", "greater than or equal to 0"), ("soon", "expected a number"),
])  # fmt: skip
def test_an_invalid_steady_state_from_s_is_one_line_naming_the_field(value, fragment):
    with pytest.raises(ConfigError) as err:
        simapf.load_scenario(start_up_storm(), [f"run.steady_state_from_s={value}"])
    text = str(err.value)
    assert len(text.splitlines()) == 1, text
    assert "run.steady_state_from_s" in text and fragment in text, text


def test_a_steady_state_from_s_before_the_end_is_accepted():
    run = simapf.load_scenario(start_up_storm(), ["run.steady_state_from_s=0"]).scenario.run
    assert run.steady_from_s == 0.0
    assert simapf.load_scenario(start_up_storm()).scenario.run.steady_from_s == 60.0


# ------------------------------------------------------------------------ the client's view


def test_apf_queue_time_outs_are_client_errors_with_at_least_the_wait_limit():
    # A 4 s request timeout gives a 1 s queue wait limit; 20 big LISTs a second into 3 seats wait
    # longer than that. No retries: each time-out is the request's final answer.
    sc = scenario(open_loop("listers", 20.0, LIST_NS0, retry={"max_retries": 0}),
                  duration_s=20.0, resources=[BIG_CONFIGMAPS], apiserver={"request_timeout_s": 4.0},
                  apf=tiny_global_default(queue_length_limit=1000))  # fmt: skip
    sim = Simulation(simapf.load_scenario(sc))
    r = sim.run()
    wait_limit_s = 1.0
    level = r.levels.set_index("priority_level").loc["global-default"]
    row = client_row(r, "listers", "list")
    assert level["rejected_time_out"] > 0
    assert row["timed_out"] == level["rejected_time_out"]  # every APF time-out, as a client error
    assert row["rejected"] == 0 and row["ok"] + row["timed_out"] == row["requests"]
    assert row["error_rate"] == pytest.approx(row["timed_out"] / row["requests"])
    assert row["max_s"] >= wait_limit_s
    log = sim.groups["listers"].stats.requests["list"]
    latency = np.frombuffer(log.latency_s)
    timed_out = np.frombuffer(log.outcome, dtype=np.uint8) == CLIENT_OUTCOMES.index("timed_out")
    assert timed_out.sum() == row["timed_out"]
    assert (latency[timed_out] >= wait_limit_s).all()  # they waited the limit, and it counts
    by_verb = {c["client"]: c for c in r.summary["clients"]}["listers"]["by_verb"]
    assert by_verb["list"]["timed_out"] == row["timed_out"] and by_verb["list"]["error_rate"] > 0
    assert f"timed-out {row['timed_out']:,}" in format_summary(r.summary)


def throttled() -> dict:
    """Every request succeeds at once, but a token bucket (8/s, burst 1) holds some back."""
    return scenario(open_loop("readers", 10.0, LIST_NS0, rate_limit={"qps": 8.0, "burst": 1}),
                    duration_s=30.0, resources=[CONFIGMAPS])  # fmt: skip


def retried() -> dict:
    """3 seats and a 2-deep queue for 12 big LISTs a second: queue-full 429s, retried after their
    Retry-After (1 s or more), almost all then served. The listers read each response as fast as
    it is written (no network link), so an attempt takes its CPU and its wait in the queue."""
    return scenario(open_loop("listers", 12.0, LIST_NS0, network={"stream_bytes_per_s": None}), duration_s=30.0,
                    resources=[BIG_CONFIGMAPS], apf=tiny_global_default(queue_length_limit=2))  # fmt: skip


@pytest.mark.parametrize("build, client", [(throttled, "readers"), (retried, "listers")])
def test_client_latency_is_at_least_the_servers_for_the_same_requests(build, client):
    r = simapf.run(build())
    row = client_row(r, client, "list")
    server = server_row(r, "global-default", "list")
    # All succeeded in the end, and the server's successful LISTs are exactly these requests.
    assert row["ok"] == row["requests"] == server["count"]
    for q in ("p50_s", "p99_s", "max_s"):
        assert row[q] >= server[q], q
    assert row["p99_s"] > server["p99_s"]  # the waits before (or between) attempts count


def test_retries_after_429_make_the_client_latency_larger_than_the_servers():
    r = simapf.run(retried())
    row = client_row(r, "listers", "list")
    server = server_row(r, "global-default", "list")
    clients = {c["client"]: c for c in r.summary["clients"]}
    assert clients["listers"]["retries_after_429"] > 0
    assert server["max_s"] < 1.0  # no one attempt takes a second ...
    assert row["max_s"] > server["max_s"] + 1.0  # ... but a Retry-After is at least one
    assert row["p99_s"] > 1.0


def test_the_client_table_is_in_the_result_the_summary_and_client_latency_csv(tmp_path):
    r = simapf.run(throttled())
    assert list(r.client_latency.columns) == CLIENT_LATENCY_COLUMNS
    row = client_row(r, "readers", "list")
    summary_row = {c["client"]: c for c in r.summary["clients"]}["readers"]
    assert summary_row["by_verb"]["list"]["requests"] == row["requests"]
    assert summary_row["outcomes"]["ok"] == row["ok"]  # the same logical requests as before
    out = write_run(r, tmp_path / "out", figure=False)
    written = pd.read_csv(out / "client_latency.csv")
    pd.testing.assert_frame_equal(written, r.client_latency, check_dtype=False)
    text = format_summary(r.summary)
    assert "latency (client side" in text and "readers" in text
