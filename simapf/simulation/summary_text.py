"""A run's summary as text a person reads at the terminal."""

from __future__ import annotations

from typing import Any, Callable

from simapf.schema.summary import Etcd, Interval, NoModelErrorBand, Section, Summary, Uncertainty, validate

MB = 1e6
ERROR_OUTCOMES = ("rejected", "timed_out", "unavailable", "failed", "gone")  # see clientgo.CLIENT_OUTCOMES


def _mb(x: float | None) -> str:
    return "-" if x is None else f"{x / MB:,.0f} MB"


def _s(x: float | None) -> str:
    if x is None:
        return "not within the run"
    if x < 1:
        return f"{x * 1000:.1f} ms"
    return f"{x:.2f} s"


def format_summary(summary: dict[str, Any]) -> str:
    """The text of a summary (summary.json's dict), read through its schema."""
    s = validate(summary)
    lines: list[str] = []
    add = lines.append
    if s.measured and s.bench is not None:
        versions = s.bench.versions
        add(f"simapf {s.simapf_version}: {s.scenario_name} ({s.source}), measured on "
            f"kube-apiserver {versions['kube-apiserver']} and etcd {versions['etcd']}: {s.duration_s:g} s of load "
            f"in {s.wall_s:.1f} wall s")  # fmt: skip
    else:
        add(f"simapf {s.simapf_version}: {s.scenario_name} ({s.source}), seed {s.seed}, "
            f"{s.duration_s:g} simulated s in {s.wall_s:.1f} wall s")  # fmt: skip
    m, c, p = s.memory, s.cpu, s.process
    notes = [f"limit {_mb(m.memory_limit_bytes)}"] if m.memory_limit_bytes else []
    if m.oom_killed:
        asking = f" asking for {_mb(m.oom_demand_bytes)}" if m.oom_demand_bytes is not None else ""
        notes.append(f"OOM-killed at {_mb(m.rss_at_oom_kill_bytes)}{asking}")
    notes.append(f"steady state from {m.steady_state_from_s:g} s: {_mb(m.peak_rss_steady_bytes)}, "
                 f"mean {_mb(m.mean_rss_steady_bytes)}")  # fmt: skip
    notes_text = f" ({'; '.join(notes)})" if notes else ""
    rss = _with_interval(m, "peak_rss_bytes", "memory", _mb)
    add(f"  memory      peak RSS {rss}{notes_text}, peak Go heap {_mb(m.peak_heap_inuse_bytes)}")
    # The peaks above are the true ones; a scrape sees less of what rises and falls between two.
    every = s.scenario.get("run", {}).get("scrape_interval_s")
    when = f"scraped every {every:g} s" if every is not None else "scraped"
    add(f"              true peaks; {when}, as Prometheus would see them: peak RSS "
        f"{_mb(m.scraped_peak_rss_bytes)}, peak Go heap {_mb(m.scraped_peak_heap_inuse_bytes)}")  # fmt: skip
    steady_cpu = f" (steady state {c.mean_cores_steady:.2f})"
    mean_cpu = _with_interval(c, "mean_cores", "cpu", lambda x: f"{x:.2f} cores")
    add(f"  CPU         mean {mean_cpu}{steady_cpu}, peak {c.peak_cores:.2f} of {c.cores:g}")
    _etcd(s.etcd, add)
    add(f"  process     {p.oom_kills} OOM kill(s), {p.kills} kill(s) in all, down {p.down_s:.0f} s")
    by = s.requests.by_outcome
    add(f"  requests    {s.requests.total:,}: " + ", ".join(f"{k} {v:,}" for k, v in by.items()))
    if len(s.replicas) > 1:
        add("")
        add(f"  replicas ({s.load_balancer.policy} balancing; per-process figures above: CPU means over them, "
            f"peaks the highest)")  # fmt: skip
        add("  replica   peak RSS      mean CPU   OOM kills   down     connections at end")
        for r in s.replicas:
            add(f"  {r.replica:>7}   {_mb(r.peak_rss_bytes):>10}   {r.mean_cores:>8.2f}   {r.oom_kills:>9}   "
                f"{r.down_s:>4.0f} s   {r.connections_at_end:>11}")  # fmt: skip
        if s.deaths:
            add("  deaths, in order (each moves its clients to the others)")
            for d in s.deaths:
                at_rss = f" at {_mb(d.rss_bytes)}" if d.rss_bytes is not None else ""
                add(f"  t={d.at_s:>8.1f} s  replica {d.replica}: {d.reason}{at_rss}; it held "
                    f"{d.connections} client connections and {d.open_watches} watches")  # fmt: skip

    add("")
    add("  priority level              requests   rejected   rate     by reason")
    for row in s.priority_levels:
        if not row.requests:
            continue
        reasons = ", ".join(f"{k[len('rejected_'):].replace('_', '-')} {v:,}" for k, v in row.counts().items() if v)
        # a measured run's level whose rate the bench could not read shows none, not 0 %
        rate = f"{100 * row.rejection_rate:>6.2f} %" if row.rejection_rate is not None else f"{'-':>6}  "
        add(f"  {row.priority_level:<26} {row.requests:>10,} {row.rejected:>10,} {rate}   {reasons}")

    if s.latency:
        add("")
        add("  latency (server side, successful requests)")
        add("  priority level              verb         count        p50        p99        max")
        for lat in s.latency:
            add(f"  {lat.priority_level:<26} {lat.verb:<8} {lat.count:>9,} {_s(lat.p50_s):>10} "
                f"{_s(lat.p99_s):>10} {_s(lat.max_s):>10}")  # fmt: skip

    classes = [(row.client, verb, x) for row in s.clients for verb, x in row.by_verb.items()]
    if classes:
        add("")
        add("  latency (client side, every request: first attempt to final response, 429 retries included)")
        add("  client                     verb       requests     errors        p50        p90        p99        max")
        for client, verb, x in classes:
            errors = ", ".join(f"{k.replace('_', '-')} {getattr(x, k):,}" for k in ERROR_OUTCOMES if getattr(x, k))
            add(f"  {client:<26} {verb:<8} {x.requests:>10,} {100 * x.error_rate:>8.2f} % {_s(x.p50_s):>10} "
                f"{_s(x.p90_s):>10} {_s(x.p99_s):>10} {_s(x.max_s):>10}" + (f"   {errors}" if errors else ""))  # fmt: skip

    if s.clients:
        add("")
        add("  clients")
        for cl in s.clients:
            extra = []
            if cl.relists is not None:
                extra.append(f"{cl.lists} lists ({cl.relists} relists), {cl.watch_breaks} broken watches")
            if cl.runs is not None:
                extra.append(f"{cl.runs} discovery runs, p50 {_s(cl.run_p50_s)}, max {_s(cl.run_max_s)}")
            if cl.mean_throttle_wait_s:
                extra.append(f"requests waited {_s(cl.mean_throttle_wait_s)} on average for the client-side token bucket")
            if cl.processing_busy_s:
                extra.append(f"{_s(cl.processing_busy_s)} processing responses client-side")
            outcomes = ", ".join(f"{k} {v:,}" for k, v in cl.outcomes.items())
            if cl.in_flight_at_end:
                extra.append(f"{cl.in_flight_at_end:,} still in flight at the end")
            add(f"  {cl.client:<26} x{cl.instances:<5} {outcomes}; {cl.retries_after_429:,} retries after 429"
                + ("; " + "; ".join(extra) if extra else ""))  # fmt: skip

    if s.events:
        add("")
        add("  events")
        for e in s.events:
            kills = e.oom_kills_until_next_event
            add(f"  t={e.at_s:>7g} s  {e.kind:<12} recovered {_s(e.recovery_s)} after it ended; "
                f"until the next event: peak RSS {_mb(e.peak_rss_bytes_until_next_event)}"
                + (f", {kills} OOM kill(s)" if kills else ""))  # fmt: skip
    if s.uncertainty is not None:
        _uncertainty(s, s.uncertainty, add)
    if s.extrapolation:
        add("")
        add("  beyond what the model was checked against (calibration and validation; docs/validation.md):")
        for item in s.extrapolation:
            add(f"  - {item}")
    return "\n".join(lines) + "\n"


def _with_interval(section: Section, field: str, kind: str, show: Callable[[float], str]) -> str:
    """A headline figure as text, with its interval where `--uncertainty` gave it one."""
    value = getattr(section, field)
    iv = section.interval(field)
    return interval_text(kind, value, iv) if iv is not None else show(value)


def _plural(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def etcd_deployment(e: Etcd) -> str:
    """The etcd a run read, in words: "3 members of 4 cores each, 0.5 ms apart"."""
    if e.embedded:
        return "embedded in the apiserver's process (its ranges on the apiserver's cores)"
    if e.members > 1:
        return f"{e.members} members of {_plural(e.cores, 'core')} each, {_s(e.member_round_trip_s)} apart"
    fitted = " (the calibration's kind node: simapf's default)" if e.fitted_deployment else ""
    return f"{_plural(e.cores, 'core')}, 1 member{fitted}"


def _etcd(e: Etcd, add: Callable[[str], None]) -> None:
    """etcd's line under CPU, and when etcd held the LISTs up while the apiserver had cores to
    spare, a line that says so (summary.json's etcd.bottleneck)."""
    busy = e.busy_fraction_steady
    use = f", its cores busy {100 * busy:.0f} % of the steady state" if busy is not None else ""
    if busy is None and e.busy_fraction is not None:  # measured: over the whole load
        use = f", its cores busy {100 * e.busy_fraction:.0f} % of the time"
    ranges = f"{_plural(e.ranges, 'range')}" if e.ranges is not None else "ranges not counted"
    add(f"  etcd        {etcd_deployment(e)}: {ranges}{use}")
    if e.bottleneck and busy is not None and e.apiserver_cores_fraction_steady is not None:
        add(f"              etcd busy {100 * busy:.0f} % of the time while the apiserver used "
            f"{100 * e.apiserver_cores_fraction_steady:.0f} % of its cores: LISTs from etcd are waiting on etcd "
            "(etcd.cores gives it more)")  # fmt: skip


# How each kind of figure reads: a number's text, and the unit the interval's bounds carry.
_SHOWN = {
    "memory": lambda x: f"{x / MB:,.0f} MB",
    "cpu": lambda x: f"{x:.2f} cores",
    "oom_kills": lambda x: f"{x:.0f}",
    "rejected": lambda x: f"{100 * x:.2f} %",
    "latency": _s,
}


_LABELS = {"peak_rss_bytes": "peak RSS", "scraped_peak_rss_bytes": "peak RSS, scraped", "peak_heap_inuse_bytes": "peak Go heap", "mean_cores": "mean CPU",
           "oom_kills": "OOM kills", "rejected_share": "rejected (429) share"}


def interval_text(kind: str, value: float, iv: Interval) -> str:
    """`2,100 MB [1,400 MB-3,300 MB]`, with a dagger when the interval is the parameters' alone."""
    show = _SHOWN[kind]
    lo, hi = (show(x) if x is not None else "?" for x in (iv.lo, iv.hi))
    dagger = "\u2020" if iv.parameters_only else ""
    return f"{show(value)} [{lo} to {hi}]{dagger}"


def _uncertainty(s: Summary, u: Uncertainty, add: Callable[[str], None]) -> None:
    from simapf.uncertainty.intervals import figures_with_intervals

    r = u.regime
    add("")
    add(f"  uncertainty: {u.level:.0%} intervals from {u.draws} parameter draws and the model's error where "
        f"validated (regime: {r.path} path, LISTs {r.size}, {'overloaded' if r.overloaded else 'not overloaded'})")  # fmt: skip
    # The scalars one to a line; latencies a line per priority level or client and verb, p50 and
    # p99 (summary.json also has the mean and p90 with theirs).
    latency: dict[str, list[str]] = {}
    for fig, iv in figures_with_intervals(s):
        text = interval_text(fig.kind, getattr(fig.holder, fig.field), iv)
        if fig.kind != "latency":
            add(f"  {_LABELS.get(fig.key, fig.key):<34} {text}")
        elif fig.field in ("p50_s", "p99_s"):
            stat, where = fig.key.split("/", 1)
            who = ("client " if stat.startswith("client_") else "") + where.replace("/", " ")
            latency.setdefault(who, []).append(f"{fig.field[:-2]} {text}")
    for who, parts in latency.items():
        add(f"  {who:<34} {', '.join(parts)}")
    missing = {k: b.none for k, b in u.model_error.items() if isinstance(b, NoModelErrorBand)}
    for kind, why in missing.items():
        add(f"  \u2020 {kind}: parameter uncertainty only; the model's own error is not known here: {why}")
