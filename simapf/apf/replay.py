"""Replay a request trace through one priority level with a fixed concurrency limit.

This is how fair queuing is checked request by request: the trace says when each request
arrives, to which flow it belongs, its seats and how long its handler runs; the output says
when it was dispatched or why it was rejected, and when its seats were released.

The module imports only the APF queueset, simapf's clock and file readers and the standard library, so that a replay of a
large trace spends its time replaying, not starting up.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from simapf.apf.queueset import Listener, QueueSet, Request
from simapf.apf.shuffle import flow_hash
from simapf.engine.clock import FINISH, EventLoop
from simapf.errors import SimapfError
from simapf.files import MAX_TEXT_BYTES, MAX_TRACE_BYTES, read_bytes

NS_PER_S = 1_000_000_000
MAX_WAIT_LIMIT_S = 60  # upstream caps any queue wait at one minute
TRACE_COLUMNS = (
    "id", "arrival_s", "flow", "initial_seats", "final_seats", "additional_latency_s", "service_s",
)  # fmt: skip
OUTPUT_COLUMNS = (
    "id", "arrival_s", "dispatched", "rejected_reason", "queue", "dispatch_s", "finish_s", "wait_s",
)  # fmt: skip


# The most queues a replayed level may have: each is an object of its own (upstream accepts ten
# times as many).
MAX_QUEUES_HELD = 1_000_000


class ReplayInputError(SimapfError):
    """A level or trace file the replay cannot use."""


@dataclass
class Trace:
    """A trace as columns, in file order: ids, handler run times, and the requests."""

    ids: list[str]
    services: list[int]  # ns from dispatch to the handler's return
    requests: list[Request]


@dataclass(frozen=True)
class LevelSpec:
    name: str
    concurrency_limit: int
    queues: int
    hand_size: int
    queue_length_limit: int
    wait_limit_ns: int


def _require_int(doc: dict, key: str, where: str, minimum: int, default: int | None = None) -> int:
    value = doc.get(key, default)
    if value is None:
        raise ReplayInputError(f"{where}: {key}: required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReplayInputError(f"{where}: {key}: must be an integer, got {value!r}")
    if value < minimum:
        raise ReplayInputError(f"{where}: {key}: must be >= {minimum}, got {value}")
    return value


def _no_duplicate_keys(where: str, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of a key written twice; the user meant one of them.
    doc: dict[str, Any] = {}
    for key, value in pairs:
        if key in doc:
            raise ReplayInputError(f"{where}: {key}: given twice")
        doc[key] = value
    return doc


def load_level(path: str | Path) -> LevelSpec:
    """Read LEVEL.json: name, concurrencyLimit, queues, handSize, queueLengthLimit,
    requestWaitLimitSeconds (default 15, capped at 60). `queues: 0` makes a Reject level."""
    where = str(path)
    data = read_bytes(Path(path), MAX_TEXT_BYTES, "a level file")
    try:
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=partial(_no_duplicate_keys, where))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReplayInputError(f"{where}: not readable JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ReplayInputError(f"{where}: must be a JSON object")
    known = {"name", "concurrencyLimit", "queues", "handSize", "queueLengthLimit",
             "requestWaitLimitSeconds"}  # fmt: skip
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ReplayInputError(f"{where}: {unknown[0]}: unknown field")
    name = doc.get("name", "level")
    if not isinstance(name, str):
        raise ReplayInputError(f"{where}: name: must be a string")
    cl = _require_int(doc, "concurrencyLimit", where, 0)
    queues = _require_int(doc, "queues", where, 0)
    if queues > MAX_QUEUES_HELD:
        raise ReplayInputError(f"{where}: queues: {queues:,} is more than the {MAX_QUEUES_HELD:,} queues a replay holds")
    # A Reject level (queues 0) has no queues to deal: the replay format writes it with
    # handSize 0 and queueLengthLimit 0, which are ignored.
    hand = _require_int(doc, "handSize", where, 0 if queues == 0 else 1, default=1 if queues == 0 else None)
    qll = _require_int(doc, "queueLengthLimit", where, 0 if queues == 0 else 1, default=50 if queues == 0 else None)
    if queues == 0:
        hand, qll = 1, 1
    if queues and hand > queues:
        raise ReplayInputError(f"{where}: handSize: must be <= queues ({queues}), got {hand}")
    if queues:
        from simapf.apf.shuffle import validate_dealer

        try:
            validate_dealer(queues, hand)
        except ValueError as err:
            raise ReplayInputError(f"{where}: handSize: {err}") from None
    wait = doc.get("requestWaitLimitSeconds", 15)
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait <= 0:
        raise ReplayInputError(
            f"{where}: requestWaitLimitSeconds: must be a positive number, got {wait!r}"
        )
    wait_ns = round(min(float(wait), MAX_WAIT_LIMIT_S) * NS_PER_S)
    return LevelSpec(name, cl, queues, hand, qll, wait_ns)


def parse_seconds_ns(text: str) -> int:
    """Seconds as written in the trace, to whole nanoseconds (half up), digit by digit.

    `_seconds_column` takes the fast path for whole columns; this serves the entries it
    cannot (more than 9 decimals, an exponent, 1e6 s or more) and reports bad ones."""
    s = text.strip()
    if s.startswith("-"):
        raise ValueError("negative")
    whole, dot, frac = s.partition(".")
    if (whole.isdigit() or (dot and not whole)) and (not frac or frac.isdigit()) and (whole or frac):
        ns = int(whole or "0") * NS_PER_S
        if frac:
            ns += int(frac[:9].ljust(9, "0"))
            if len(frac) > 9 and frac[9] >= "5":
                ns += 1
        return ns
    value = float(s)  # exponent notation and the like; fine to nanoseconds below ~1e6 s
    if value < 0 or value != value or value == float("inf"):
        raise ValueError("not a finite, non-negative number")
    return round(value * NS_PER_S)


def _seconds_column(texts: tuple[str, ...], column: str, where: str) -> list[int]:
    """A column of seconds to whole nanoseconds, converted a column at a time (fast), with
    the exact digit-by-digit path for entries the fast path cannot take."""
    try:
        values = list(map(float, texts))
    except ValueError:
        values = None
    # NaN fails both comparisons, so a column with one takes the checked path below.
    if values is not None and values and min(values) >= 0.0 and max(values) < 1e6 and all(v == v for v in values):
        out = [round(v * NS_PER_S) for v in values]
        for i, text in enumerate(texts):  # more than 9 decimals, or an exponent
            dot = text.find(".")
            if (dot >= 0 and len(text) - dot > 10) or "e" in text or "E" in text:
                out[i] = _parse_or_fail(text, column, where, i)
        return out
    return [_parse_or_fail(text, column, where, i) for i, text in enumerate(texts)]


def _parse_or_fail(text: str, column: str, where: str, row: int) -> int:
    try:
        return parse_seconds_ns(text)
    except ValueError:
        raise ReplayInputError(
            f"{where}: line {row + 2}: {column}: not a non-negative number: {text!r}"
        ) from None


def _int_column(texts: tuple[str, ...], column: str, where: str, minimum: int) -> list[int]:
    try:
        values = list(map(int, texts))
    except ValueError:
        for i, text in enumerate(texts):
            try:
                int(text)
            except ValueError:
                raise ReplayInputError(
                    f"{where}: line {i + 2}: {column}: not an integer: {text!r}"
                ) from None
        raise
    if values and min(values) < minimum:
        i = next(i for i, v in enumerate(values) if v < minimum)
        raise ReplayInputError(
            f"{where}: line {i + 2}: {column}: must be >= {minimum}, got {values[i]}"
        )
    return values


def load_trace(path: str | Path, use_hash: bool = True) -> Trace:
    """Read TRACE.csv, in file order."""
    where = str(path)
    try:
        text = read_bytes(Path(path), MAX_TRACE_BYTES, "a trace").decode("utf-8")
    except UnicodeDecodeError as err:
        raise ReplayInputError(f"{where}: not UTF-8 text: {err}") from None
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if header is None:
                raise ReplayInputError(f"{where}: empty file, a header row is required")
            header = [h.strip() for h in header]
            missing = [c for c in TRACE_COLUMNS if c not in header]
            if missing:
                raise ReplayInputError(f"{where}: missing column {missing[0]!r}")
            rows = [row for row in reader if row]
        except csv.Error as err:
            raise ReplayInputError(f"{where}: line {reader.line_num}: not readable CSV: {err}") from None
        except UnicodeDecodeError as err:
            raise ReplayInputError(f"{where}: not UTF-8 text: {err}") from None
    width = len(header)
    for line, row in enumerate(rows, start=2):
        if len(row) != width:
            raise ReplayInputError(f"{where}: line {line}: {len(row)} fields, header has {width}")
    if not rows:
        return Trace([], [], [])
    columns = list(zip(*rows))
    col = {name: columns[header.index(name)] for name in TRACE_COLUMNS}
    arrivals = _seconds_column(col["arrival_s"], "arrival_s", where)
    services = _seconds_column(col["service_s"], "service_s", where)
    latencies = _seconds_column(col["additional_latency_s"], "additional_latency_s", where)
    initials = _int_column(col["initial_seats"], "initial_seats", where, 1)
    finals = _int_column(col["final_seats"], "final_seats", where, 0)
    flows = col["flow"]
    if use_hash:
        hashes = {}
        for flow in set(flows):
            fs_name, _, distinguisher = flow.partition("/")
            hashes[flow] = flow_hash(fs_name, distinguisher)
        flow_hashes = list(map(hashes.__getitem__, flows))
    else:
        flow_hashes = [0] * len(flows)
    requests = list(map(Request, range(len(flows)), flow_hashes, initials, finals, latencies, arrivals))
    return Trace(list(col["id"]), services, requests)


class _Recorder:
    """The level's listener during a replay: schedules each handler's end, and tells an
    optional observer (tests use one to check invariants at every decision)."""

    __slots__ = ("loop", "qs", "services", "observer")

    def __init__(self, loop: EventLoop, services: list[int], observer: Listener | None) -> None:
        self.loop = loop
        self.services = services
        self.observer = observer
        self.qs: QueueSet | None = None

    def dispatched(self, req: Request) -> None:
        loop = self.loop
        # Handlers that return at one instant return in the order their requests arrived.
        loop.at_ticket(loop.now + self.services[req.seq], self.qs.finish, req, FINISH, req.ticket)
        if self.observer is not None:
            self.observer.dispatched(req)

    def rejected(self, req: Request, reason: str) -> None:
        if self.observer is not None:
            self.observer.rejected(req, reason)

    def released(self, req: Request) -> None:
        if self.observer is not None:
            self.observer.released(req)


def replay(level: LevelSpec, trace: Trace, observer: Listener | None = None) -> list[Request]:
    """Run the trace through the level; returns the requests in file order, decided.

    An observer, if given, gets the level as `observer.qs` and hears every decision."""
    loop = EventLoop()
    recorder = _Recorder(loop, trace.services, observer)
    qs = QueueSet(
        level.name, loop, recorder, level.concurrency_limit, level.queues,
        level.hand_size, level.queue_length_limit, level.wait_limit_ns,
    )  # fmt: skip
    recorder.qs = qs
    if observer is not None:
        observer.qs = qs
    requests = trace.requests
    # Arrivals in time order, file order within an instant; everything else due at or
    # before an arrival's instant (releases, finishes, time-outs) runs before it.
    arrivals = sorted(requests, key=lambda r: r.arrival_ns)
    advance_to = loop.advance_to
    arrive = qs.arrive
    for req in arrivals:
        advance_to(req.arrival_ns)
        arrive(req)
    loop.run()
    return requests


def write_output(path: str | Path, trace: Trace, force: bool = False, inputs: tuple = ()) -> None:
    """Write OUT.csv as every simapf output file is written (`simapf.files.output_file`): never
    over an input, an existing file only with `force`, atomically (a temporary file beside it,
    then a rename)."""
    from simapf.files import output_file

    with output_file(path, "replay", "--out", force, inputs) as tmp, open(tmp, "w", newline="") as out:
        out.write(",".join(OUTPUT_COLUMNS) + "\n")
        n = NS_PER_S  # times as seconds with 9 decimals, exact from integer ns
        lines = []
        for rid, req in zip(trace.ids, trace.requests):
            if '"' in rid or "," in rid or "\n" in rid or "\r" in rid:
                rid = '"' + rid.replace('"', '""') + '"'
            queue = str(req.queue_index) if req.queue_index >= 0 else ""
            a = req.arrival_ns
            if req.dispatch_ns >= 0:
                d, f = req.dispatch_ns, req.release_ns
                w = d - a
                lines.append(
                    f"{rid},{a // n}.{a % n:09d},true,,{queue},{d // n}.{d % n:09d},"
                    f"{f // n}.{f % n:09d},{w // n}.{w % n:09d}\n"
                )
            else:
                w = req.deadline_ns - a if req.reject_reason == "time-out" else 0
                lines.append(
                    f"{rid},{a // n}.{a % n:09d},false,{req.reject_reason},{queue},,,"
                    f"{w // n}.{w % n:09d}\n"
                )
        out.writelines(lines)


def run_replay(level_path: str | Path, trace_path: str | Path, out_path: str | Path, force: bool = False) -> dict:
    """The `simapf replay` command: returns counts for the summary line."""
    from simapf.files import check_output_file

    inputs = (level_path, trace_path)
    check_output_file(out_path, "--out", force, inputs)
    level = load_level(level_path)
    trace = load_trace(trace_path, use_hash=level.queues > 1)
    requests = replay(level, trace)
    write_output(out_path, trace, force, inputs)
    dispatched = sum(1 for r in requests if r.dispatch_ns >= 0)
    return {"requests": len(requests), "dispatched": dispatched,
            "rejected": len(requests) - dispatched}  # fmt: skip
