"""The registry of the documents' numbers (docs/numbers/*.yaml), and its check.

Each file of docs/numbers/ speaks for one document (`doc:`) and may define runs for all:

    doc: docs/tutorial.md
    runs:
      default: {scenario: default}                  # a shipped file, `default`, or DOC.md#yaml
      list-400: {scenario: docs/tutorial.md#yaml, set: [clients.controllers.count=400], slow: true}
    numbers:
      - at: "The LIST storm peaked at {} GB of the {} GiB limit"
        is:
          - run["default"].events[0].peak_rss_bytes_until_next_event / 1e9
          - scenario["simapf/scenario/default.yaml"].apiserver.memory_limit_bytes / 2**30
      - at: "measured there: {} cores"
        is: csv["calibration/list-memory-experiments.csv"].row(source="etcd", qps=1800).cpu_cores
        cite: kubernetes/kubernetes#132233
    generated:
      - after: "simapf run --out runs/default"      # the first output block after these words
        is: summary_text(run["default"], until="requests")
      - whole: true                                 # the whole document, made by a command
        by: python -m simapf.scenario.docs
        checked_by: tests/scenario/test_reference_doc.py

`at:` is the document's own words, with `{}` where each number stands (line breaks and a
scenario header's `#` match any space). `is:` gives one expression per `{}` (see
`docnumbers.sources`): a run's figure, an input (a field of the shipped file the words
describe), or a fact computed from those. The number is shown as the expression's value
rounded to the decimals the document writes (`sig: N`: to N significant digits first, for an
"about"). `cite:` names where an external fact comes from (upstream, a KEP, a paper); with an
`is:` as well it is checked against the repository's copy of that data.
"""

from __future__ import annotations

import dataclasses
import math
import re
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from docnumbers import scan
from docnumbers.scan import ROOT, Number
from docnumbers.sources import RunSpec, Runs, SkipRun, namespace

REGISTRY = ROOT / "docs" / "numbers"
PENDING = "pending.yaml"  # the documents not yet accounted for, each with its count of numbers left
END = "<<end of the document>>"  # a `between:` that runs to the end
SPACE = r"[\s#>*]+"  # what a line break in the words may stand for: a header's `#`, a quote's `>`


class RegistryError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Entry:
    doc: str
    at: str
    values: tuple[str, ...]  # one expression per `{}`, or none for a citation the repository cannot check
    cite: str | None
    sig: int | tuple[int | None, ...] | None  # for all its numbers, or one per `{}`
    holds: str | None  # a conclusion the words draw from the numbers: an expression that must be true
    source: str  # the registry file, for messages
    checked_by: str | None = None  # a test of its own that checks these numbers against a run
    machine: str | None = None  # why these numbers are the machine's (the words must name it), not checked

    @property
    def kind(self) -> str:
        if self.checked_by:
            return "checked by " + self.checked_by
        if self.machine:
            return "the machine's"
        if self.cite:
            return "cited"
        if any("run[" in v for v in self.values):
            return "run"
        return "input"

    def pattern(self) -> re.Pattern:
        parts = [re.sub(r"(?:\\ )+", lambda _m: SPACE, re.escape(p)) for p in self.at.split("{}")]
        edge = (r"(?<!\w)" if self.at[:1].isalnum() else "", r"(?!\w)" if self.at[-1:].isalnum() else "")
        return re.compile(edge[0] + f"(?<!\\d)(?<!\\d[.,])({scan.NUMBER.pattern})(?!\\d|[.,]\\d)".join(parts) + edge[1])


@dataclasses.dataclass(frozen=True)
class Generated:
    doc: str
    after: str | None  # the first output block after these words; None: see `whole`, `between`
    between: tuple[str, str] | None  # or the text between two markers, made and checked elsewhere
    whole: bool
    value: str | None  # the expression that makes the block
    by: str | None  # the command that makes it
    checked_by: str | None  # the test that checks it
    source: str

    def span(self, text: str) -> tuple[int, int]:
        if self.whole:
            return 0, len(text)  # the whole document
        if self.between:
            start = _once(text, re.escape(self.between[0]), self).end()
            if self.between[1] == END:
                return start, len(text)
            return start, _once(text, re.escape(self.between[1]), self).start()
        m = _once(text, re.escape(self.after), self)
        block = re.compile(r"^```(?:text|output|console)?\n(.*?)^```", re.S | re.M).search(text, m.end())
        if not block:
            raise RegistryError(f"{self.source}: no output block after {self.after!r} in {self.doc}")
        return block.start(1), block.end(1)


def _once(text: str, pattern: str, owner) -> re.Match:
    found = list(re.finditer(re.sub(r"(?:\\ )+", lambda _m: SPACE, pattern), text))
    if len(found) != 1:
        raise RegistryError(f"{owner.source}: {owner.doc} has {pattern!r} {len(found)} times, not once")
    return found[0]


@dataclasses.dataclass
class Registry:
    entries: list[Entry]
    generated: list[Generated]
    runs: dict[str, RunSpec]
    names: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)  # per document: short names

    @classmethod
    def load(cls, folder: Path = REGISTRY) -> "Registry":
        entries, generated, runs, names = [], [], {}, {}
        for path in sorted(p for p in folder.glob("*.yaml") if p.name != PENDING):
            source = path.relative_to(ROOT).as_posix()
            try:
                raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError as e:
                raise RegistryError(f"{source}: not YAML: {e}") from None
            unknown = set(raw) - {"doc", "runs", "names", "numbers", "generated"}
            if unknown:
                raise RegistryError(f"{source}: unknown keys {sorted(unknown)}")
            for name, spec in (raw.get("runs") or {}).items():
                if name in runs:
                    raise RegistryError(f"{source}: run {name!r} is defined twice")
                runs[name] = RunSpec(name, spec["scenario"], tuple(spec.get("set", ())), bool(spec.get("slow", False)))
            doc = raw.get("doc")
            names[doc] = {str(k): str(v) for k, v in (raw.get("names") or {}).items()}
            if (raw.get("numbers") or raw.get("generated")) and not (doc and (ROOT / doc).is_file()):
                raise RegistryError(f"{source}: doc {doc!r} is not a file of the checkout")
            for item in raw.get("numbers") or ():
                values = item.get("is", ())
                # A list may leave a number to the citation: `null` where the entry's `cite:` speaks for it.
                values = (values,) if isinstance(values, str) else tuple("" if v is None else str(v) for v in values)
                sig = tuple(item["sig"]) if isinstance(item.get("sig"), list) else item.get("sig")
                entry = Entry(doc, item["at"], values, item.get("cite"), sig, item.get("holds"), source,
                              item.get("checked_by"), item.get("machine"))  # fmt: skip
                slots = entry.at.count("{}")
                if entry.checked_by:
                    if not (ROOT / entry.checked_by).is_file():
                        raise RegistryError(f"{source}: checked_by {entry.checked_by!r} is not a file of the checkout")
                    entries.append(entry)
                    continue
                if entry.holds and not slots and not values:
                    entries.append(entry)
                    continue
                if entry.machine and not values:
                    entries.append(entry)
                    continue
                if "" in values and not entry.cite:
                    raise RegistryError(f"{source}: {entry.at!r}: a `null` number needs a `cite:`")
                if not slots or (values and len(values) != slots) or not (values or entry.cite):
                    raise RegistryError(f"{source}: {entry.at!r}: give one `is:` per {{}} ({slots}), or a `cite:`")
                entries.append(entry)
            for item in raw.get("generated") or ():
                between = tuple(item["between"]) if "between" in item else None
                g = Generated(doc, item.get("after"), between, bool(item.get("whole")), item.get("is"),
                              item.get("by"), item.get("checked_by"), source)  # fmt: skip
                if not (g.value or (g.by and g.checked_by)):
                    raise RegistryError(f"{source}: a generated part needs `is:`, or `by:` and `checked_by:`")
                if g.checked_by and not (ROOT / g.checked_by).is_file():
                    raise RegistryError(f"{source}: checked_by {g.checked_by!r} is not a file of the checkout")
                generated.append(g)
        return cls(entries, generated, runs, names)


def load_pending(folder: Path = REGISTRY) -> dict[str, int]:
    """Documents whose numbers are not all accounted for yet: how many each has left."""
    path = folder / PENDING
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}


# ------------------------------------------------------------------------------------- the check


@dataclasses.dataclass(frozen=True)
class Problem:
    doc: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.message}"


@dataclasses.dataclass(frozen=True)
class Slot:
    entry: Entry
    index: int
    start: int
    end: int
    shown: str


class Document:
    """One document with its numbers and what the registry says of each."""

    def __init__(self, path: Path, registry: Registry):
        self.path, self.registry = path, registry
        self.rel = path.relative_to(ROOT).as_posix()
        self.text = path.read_text(encoding="utf-8")
        # What the registry's words are looked for in: a scenario's header, not its fields.
        self.words = self.text if path.suffix == ".md" else self.text[: scan.header_lines(self.text)]

    @cached_property
    def numbers(self) -> list[Number]:
        return scan.scan(self.path)

    @cached_property
    def entries(self) -> list[Entry]:
        return [e for e in self.registry.entries if e.doc == self.rel]

    @cached_property
    def generated(self) -> list[tuple[Generated, int, int]]:
        return [(g, *g.span(self.text)) for g in self.registry.generated if g.doc == self.rel]

    def slots(self) -> tuple[list[Slot], list[Problem]]:
        slots, problems = [], []
        for e in self.entries:
            found = list(e.pattern().finditer(self.words))
            if not e.at.count("{}") and len(found) == 1:
                continue  # words that draw a conclusion only: checked with the values
            if len(found) != 1:
                problems.append(Problem(self.rel, 1, f"{e.source}: the words {e.at!r} are here {len(found)} times, not once"))
                continue
            m = found[0]
            before = self.words.rfind("\n\n", 0, self.words.rfind("\n\n", 0, m.start()))  # its paragraph and the one before
            if e.machine and not scan.MACHINE.search(self.words[max(0, before) : m.end()]):
                problems.append(Problem(self.rel, self._line(m.start()), f"{e.source}: {e.at!r} is registered as the "
                                        "machine's, but its paragraph does not say so (\"on this machine\", \"wall time\")"))  # fmt: skip
            slots += [Slot(e, i, m.start(i + 1), m.end(i + 1), m.group(i + 1)) for i in range(e.at.count("{}"))]
        return slots, problems

    def unaccounted(self) -> list[Problem]:
        """Numbers that are quantities, not named as the machine's, and neither generated nor registered."""
        slots, problems = self.slots()
        covered = {s.start for s in slots}
        spans = [(a, b) for _g, a, b in self.generated]
        for n in self.numbers:
            if n.start in covered or any(a <= n.start < b for a, b in spans):
                continue
            if scan.not_a_quantity(n, self.text) or scan.machine_dependent(n, self.text) or scan.record(n, self.text):
                continue
            problems.append(Problem(self.rel, n.line(self.text), f"{n.text}{' ' + n.unit if n.unit else ''} "
                                    f"({n.where}) is neither generated nor registered: {_context(self.text, n)}"))  # fmt: skip
        return problems

    def disagreements(self, runs: Runs) -> tuple[list[Problem], list[tuple[int, int, str]]]:
        """Registered numbers and generated parts that differ from their sources, and each
        replacement (start, end, text) that would make them agree; runs not allowed are skipped."""
        names = namespace(runs)
        for short, expression in self.registry.names.get(self.rel, {}).items():  # a file's own `names:`
            names[short] = _Lazy(expression, names)
        slots, problems = self.slots()
        edits: list[tuple[int, int, str]] = []
        shown: dict[Entry, list[float]] = {}  # each entry's numbers as the document writes them
        for s in slots:
            shown.setdefault(s.entry, []).append(float(re.sub(r"[,\s\u202f]", "", s.shown)))
        for s in slots:
            if s.entry.checked_by:
                # Another test holds this number to a run: it must at least be the number that test checks.
                if s.shown not in (ROOT / s.entry.checked_by).read_text(encoding="utf-8"):
                    problems.append(Problem(self.rel, self._line(s.start), f"{s.shown} in {s.entry.at!r}: "
                                            f"{s.entry.checked_by} does not check that number"))  # fmt: skip
                continue
            if not s.entry.values or not s.entry.values[s.index]:
                continue  # a citation with no copy of the data in the repository, or the machine's
            try:
                value = eval(s.entry.values[s.index], {"__builtins__": {}, **names, "shown": shown[s.entry]})  # noqa: S307
            except SkipRun:
                continue
            except Exception as e:  # noqa: BLE001 (a registry mistake, said at its entry)
                problems.append(Problem(self.rel, self._line(s.start), f"{s.entry.source}: {s.entry.values[s.index]}: {e}"))
                continue
            want = render(value, s.shown, s.entry.sig[s.index] if isinstance(s.entry.sig, tuple) else s.entry.sig)
            if want is None:
                problems.append(Problem(self.rel, self._line(s.start), f"{s.entry.values[s.index]} is {value!r}, not a number"))
            elif _plain(want) != _plain(s.shown):
                problems.append(Problem(self.rel, self._line(s.start), f"{s.shown} in {s.entry.at!r} is {want} from "
                                        f"{s.entry.values[s.index]} ({s.entry.kind})"))  # fmt: skip
                edits.append((s.start, s.end, want))
        for e in {s.entry for s in slots} | {e for e in self.entries if not e.at.count("{}")}:
            if not e.holds:
                continue
            try:  # `shown`: the entry's own numbers, as the document writes them
                true = eval(e.holds, {"__builtins__": {}, **names, "shown": shown.get(e, [])})  # noqa: S307
            except SkipRun:
                continue
            except Exception as exc:  # noqa: BLE001
                problems.append(Problem(self.rel, 1, f"{e.source}: {e.holds}: {exc}"))
                continue
            if not true:
                problems.append(Problem(self.rel, self._line(self.text.find(e.at.split("{}")[0])),
                                        f"{e.at!r} draws a conclusion a run does not: {e.holds} is false"))  # fmt: skip
        for g, a, b in self.generated:
            if not g.value:
                continue
            try:
                want = eval(g.value, {"__builtins__": {}, **names})  # noqa: S307
            except SkipRun:
                continue
            if want != self.text[a:b]:
                problems.append(Problem(self.rel, self._line(a), f"the block {'after ' + repr(g.after) if g.after else 'at ' + repr(g.between[0][:40])} is not what {g.value} gives"))
                edits.append((a, b, want))
        return problems, edits

    def _line(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1


class _Lazy:
    """A registry file's short name for an expression, evaluated when first used."""

    def __init__(self, expression: str, names: dict[str, Any]):
        self._expression, self._names, self._value = expression, names, None

    def _get(self) -> Any:
        if self._value is None:
            self._value = eval(self._expression, {"__builtins__": {}, **self._names})  # noqa: S307
        return self._value

    def __getattr__(self, key: str) -> Any:
        return getattr(self._get(), key)

    def __getitem__(self, key: Any) -> Any:
        return self._get()[key]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._get()(*args, **kwargs)

    def __iter__(self):
        return iter(self._get())


def render(value: Any, shown: str, sig: int | None) -> str | None:
    """The value written as the document writes `shown`: its decimals and digit grouping."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if sig:
        value = float(f"{value:.{sig}g}")
    if "e" in shown:  # 4.5e-8, as the document writes it: the mantissa's decimals, a bare exponent
        text = f"{value:.{len(shown.partition('e')[0].partition('.')[2])}e}"
        if re.search(r"e[-+]0|e\+", shown):
            return text  # 9.223e+09, as Python writes it
        mantissa, _, exponent = text.partition("e")
        return f"{mantissa}e{int(exponent)}"
    decimals = len(shown.partition(".")[2])
    text = f"{value:,.{decimals}f}"
    if " " in shown or "\u202f" in shown:
        text = text.replace(",", shown[re.search(r"[ \u202f]", shown).start()])
    elif "," not in shown and value < 10_000 and len(shown.partition(".")[0]) <= 4:
        text = text.replace(",", "")  # "2400" as the document writes four digits
    return text


def _plain(text: str) -> str:
    return re.sub(r"[,\s\u202f]", "", text)


def _context(text: str, n: Number) -> str:
    a = max(text.rfind("\n", 0, n.start) + 1, n.start - 50)
    b = text.find("\n", n.end)
    b = min(b if b >= 0 else len(text), n.end + 30)
    return repr(text[a:b].strip())


def documents(registry: Registry) -> list[Document]:
    return [Document(p, registry) for p in scan.documents()]


def rewrite(docs: list[Document], runs: Runs) -> list[str]:
    """Put every source's figure into the documents; returns the documents changed."""
    changed = []
    for d in docs:
        _problems, edits = d.disagreements(runs)
        if not edits:
            continue
        text = d.text
        for a, b, new in sorted(edits, reverse=True):
            text = text[:a] + new + text[b:]
        d.path.write_text(text, encoding="utf-8")
        changed.append(d.rel)
    return changed
