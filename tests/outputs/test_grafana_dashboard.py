"""The shipped Grafana dashboard reads a simapf run: every PromQL expression in
`examples/grafana/relist-storm-dashboard.json` names metrics, labels and label values that the
OpenMetrics export of a short relist storm contains, as Prometheus stores them once promtool
has loaded it (sample names with their `_total`, `_bucket`, `_count` suffixes)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

import simapf
from simapf.outputs.export import openmetrics_text
from simapf.outputs.rundir import write_run

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "examples" / "grafana" / "relist-storm-dashboard.json"

# The relist storm compressed: every informer starts within 10 s against a server that admits
# 40 requests at a time, so within 30 simulated seconds APF queues, rejects and times requests
# out, and every panel has data.
STORM = ("scenarios/relist-storm.yaml", {"run.duration_s": 30, "events": [], "clients.controllers.start.spread_s": 10,
                                         "apiserver.max_requests_inflight": 40})  # fmt: skip

# PromQL's aggregation operators and keywords: never metric names.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                "quantile", "limitk", "limit_ratio"}  # fmt: skip
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"bool", "offset", "and", "or", "unless", "atan2"}

TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>(){},])
  | (?P<space>\s+)
""", re.VERBOSE)  # fmt: skip


def tokens(expr: str) -> list[tuple[str, str]]:
    out, i = [], 0
    while i < len(expr):
        m = TOKEN.match(expr, i)
        assert m, f"cannot read {expr[i:]!r} in {expr!r}"
        if m.lastgroup != "space":
            out.append((m.lastgroup, m.group()))
        i = m.end()
    return out


def parse(expr: str) -> tuple[list[tuple[str, list[tuple[str, str, str]]]], set[str]]:
    """The selectors of a PromQL expression, each (metric name, [(label, op, value)]), and the
    labels its `by`/`without`/`on`/`ignoring` clauses name."""
    toks = tokens(expr)
    selectors, grouping, i = [], set(), 0
    while i < len(toks):
        kind, text = toks[i]
        after = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "ident" and text in GROUPING:
            if after != "(":  # group_left and group_right may name no labels
                assert text.startswith("group_"), f"{text} without a label list in {expr!r}"
                i += 1
                continue
            j = i + 2
            while toks[j][1] != ")":
                if toks[j][0] == "ident":
                    grouping.add(toks[j][1])
                j += 1
            i = j + 1
            continue
        if kind == "ident" and after != "(" and text not in AGGREGATIONS | KEYWORDS:
            matchers, i = [], i + 1
            if after == "{":
                j = i + 1
                while toks[j][1] != "}":
                    (k1, label), (k2, op), (k3, value) = toks[j : j + 3]
                    assert k1 == "ident" and k2 == "op" and k3 == "string", f"a matcher in {expr!r}"
                    matchers.append((label, op, value[1:-1]))
                    j += 4 if toks[j + 3][1] == "," else 3
                i = j + 1
            selectors.append((text, matchers))
            continue
        assert text != "{", f"a selector without a metric name in {expr!r}"
        i += 1
    return selectors, grouping


def test_the_tokenizer_reads_what_the_dashboard_writes():
    selectors, grouping = parse('histogram_quantile(0.99, sum by (le, verb) (rate(x_bucket{job=~"$job", '
                                'verb!~"WATCH|CONNECT"}[1m]))) / on (verb) group_left y')  # fmt: skip
    assert selectors == [("x_bucket", [("job", "=~", "$job"), ("verb", "!~", "WATCH|CONNECT")]), ("y", [])]
    assert grouping == {"le", "verb"}


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(panels: list[dict]) -> list[dict]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for p in panels:
        out.append(p)
        out += _panels(p.get("panels", []))
    return out


def _expressions(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, expression) of every query, with the dashboard's variables at their default
    (a variable with "All" selected at its all value)."""
    values = {}
    for var in dashboard["templating"]["list"]:
        current = var.get("current", {}).get("value")
        values[var["name"]] = var["allValue"] if current == "$__all" else current
    out = []
    for panel in _panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            expr = re.sub(r"\$(\w+)", lambda m: values.get(m.group(1), m.group(0)), target["expr"])
            out.append((panel["title"], expr))
    return out


SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? ")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _stored(text: str) -> dict[str, dict[str, set[str]]]:
    """Per sample name of an OpenMetrics text (the name Prometheus stores it under), the values
    each of its labels takes."""
    series: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, labels = SAMPLE.match(line).groups()
        series[name]  # a sample without labels still names a series
        for label, value in LABEL.findall(labels or ""):
            series[name][label].add(value)
    return series


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("storm") / "run"
    scenario, overrides = STORM
    write_run(simapf.run(REPO / scenario, overrides), out)
    return openmetrics_text(out, start_unix_s=1_767_225_600)


def _problems(expr: str, stored: dict[str, dict[str, set[str]]]) -> list[str]:
    selectors, grouping = parse(expr)
    problems = []
    for name, matchers in selectors:
        if name not in stored:
            problems.append(f"no metric {name}")
            continue
        labels = stored[name]
        for label, op, value in matchers:
            if op in ("=", "=~") and re.fullmatch(value, ""):
                continue  # matches a series without the label (a variable left at All)
            if label not in labels:
                problems.append(f"{name} has no label {label}")
            elif op == "=" and value not in labels[label]:
                problems.append(f"{name}{{{label}}} is never {value!r} (it is {sorted(labels[label])})")
            elif op == "=~" and not any(re.fullmatch(value, v) for v in labels[label]):
                problems.append(f"{name}{{{label}}} never matches {value!r}")
        problems += [f"{name} has no label {g} to group by" for g in sorted(grouping) if g not in labels]
    return problems


def test_every_query_names_metrics_and_labels_the_export_has(exported):
    stored = _stored(exported)
    expressions = _expressions(_dashboard())
    assert expressions
    problems = [f"{title}: {expr}: {p}" for title, expr in expressions for p in _problems(expr, stored)]
    assert not problems, "\n".join(problems)


def test_the_check_would_see_a_query_the_export_cannot_answer(exported):
    stored = _stored(exported)
    assert _problems('sum by (flow_schema) (apiserver_flowcontrol_current_executing_seats)', stored)
    assert _problems('rate(apiserver_flowcontrol_rejected_requests_total{reason="cancelled"}[1m])', stored)
    assert _problems("apiserver_flowcontrol_current_inqueue_seats", stored)
    assert not _problems('sum by (reason) (rate(apiserver_flowcontrol_rejected_requests_total{job=~".*"}[1m]))',
                         stored)  # fmt: skip


def test_the_dashboard_has_the_relist_storm_panels():
    """Seats in use and waiting per priority level, rejections by reason, latency, memory and
    heap, GC CPU: each queried, grouped as the panel needs."""
    used: dict[str, set[str]] = defaultdict(set)
    for _, expr in _expressions(_dashboard()):
        selectors, grouping = parse(expr)
        for name, _ in selectors:
            used[name] |= grouping
    assert "priority_level" in used["apiserver_flowcontrol_current_executing_seats"]
    assert "priority_level" in used["apiserver_flowcontrol_current_inqueue_requests"]
    assert "reason" in used["apiserver_flowcontrol_rejected_requests_total"]
    assert "le" in used["apiserver_request_duration_seconds_bucket"]
    assert "le" in used["apiserver_flowcontrol_request_wait_duration_seconds_bucket"]
    assert {"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
            "go_cpu_classes_gc_total_cpu_seconds_total"} <= set(used)  # fmt: skip


def test_every_panel_queries_the_dashboards_data_source():
    dashboard = _dashboard()
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert "datasource" in names
    for panel in _panels(dashboard["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"]), panel["title"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Prometheus) is not installed")
def test_promtool_parses_every_query(tmp_path):
    """Prometheus's own parser, through a rules file of the dashboard's expressions."""
    rules = [{"record": f"dashboard:query:{i}", "expr": expr} for i, (_, expr) in enumerate(_expressions(_dashboard()))]
    path = tmp_path / "rules.json"  # JSON is YAML
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
