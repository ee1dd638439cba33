"""Every number a reader meets in simapf's documents, and which of them are not quantities.

The documents are README.md, docs/*.md and the comment block each shipped scenario starts with
(scenarios/**/*.yaml and the built-in default).
A number is a run of digits as a reader reads one: `1,775`, `108 000`, `0.35`, `2.5e6`, `2400`
of `2400Mi`. Each is found with where it stands (prose, a table, an output block) and what
follows it (its unit), so that the rules below can tell a quantity from a name.

What is read at all: prose, tables and output blocks (fenced blocks without a language, or
`text`). What is not: code (fenced blocks in a language, inline code spans, the commands and
`key=value` settings of a scenario header) is what the reader types, not a claim; link targets,
addresses and HTML comments are not read.

What is not a quantity (`not_a_quantity` gives the reason): a number glued to a word (`p99`,
`x86_64`, `M/M/16`, `HTTP/2`), a commit (seven or more hex digits, or digits alone: quantities
that long are written with separators here), a date or a year, a version (three parts, or
`1.NN` after a word that introduces one: "Kubernetes 1.37", "before 1.35"), an issue or pull
request (`#123`, "issue 24", "KEP-3157"), a section (`§5`, "section 7", a numbered heading), a
list item's or a numbered step's label, and an HTTP status code.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documents() -> list[Path]:
    """The documents every number of which is accounted for."""
    scenarios = [*sorted((ROOT / "scenarios").rglob("*.yaml")), ROOT / "simapf" / "scenario" / "default.yaml"]
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *scenarios]


@dataclass(frozen=True)
class Number:
    doc: str  # path from the checkout's root
    start: int  # offsets of the digits in the document's text
    end: int
    text: str  # as written: "1,775"
    unit: str  # the word right after it ("MB", "GiB", "s", "%"), or ""
    where: str  # "prose", "table" or "output"

    @property
    def value(self) -> float:
        return float(re.sub(r"[,\s]", "", self.text))

    def line(self, source: str) -> int:
        return source.count("\n", 0, self.start) + 1


# A number as written: grouped by commas or (thin) spaces, or plain; a decimal part; an exponent.
NUMBER = re.compile(
    r"(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?:[ \u202f\u00a0]\d{3})+(?![\d,.]\d)|\d+)(?:\.\d+)?(?:e[-+]?\d+(?![a-z]))?"
)
UNIT = re.compile(r"\s?([A-Za-zµ%×][A-Za-z/%]*)")
HASH = re.compile(r"(?<![\w.])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w])")
DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b(?:January|February|March|April|May|June|July|August|September|October|"
    r"November|December) (?:\d{1,2}, )?\d{4}\b|\b(?:19|20)\d\d\b(?!\s?(?:[A-Za-z%]|\d))"
)
VERSION_WORD = re.compile(
    r"(?:\b(?:Kubernetes|kubernetes|kubectl|client-go|apiserver|kube-apiserver|Python|CPython|Go|mypyc|release|"
    r"releases|version|versions|since|before|after|until|from|Since|Before|After|From|Until|K8s|etcd|alpha|beta|GA|"
    r"default)\s+"
    r"|\bv|\b1\.\d\d\s?(?:to|and|or|-|–)\s?)$"
)
ISSUE_WORD = re.compile(r"(?:#|\b(?:issue|issues|Issue|PR|PRs|pull request|KEP|item|items)[ -]#?)$")
SECTION_WORD = re.compile(r"(?:§\s?|§§\s?|§\s?\d+(?:\.\d+)*[–-]|\b(?:section|sections|Section|step|Step|part|Part|notebook|Notebook|panel|row|rows|Row)\s"
                          r"|\b[Nn]otebooks\s(?:\d+(?:, | and | or |-|–))*)$")  # fmt: skip
STATUS_CODES = {"409", "410", "429", "503", "504"}
LIST_LABEL = re.compile(r"^[ \t#]*(?:[-*] )?(?:#+\s*)?$")  # only markup before it on its line


def _blank(text: str, a: int, b: int) -> str:
    return text[:a] + re.sub(r"[^\n]", "\x00", text[a:b]) + text[b:]


def _mask_md(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text with what is not read turned into NULs, and the spans of its output blocks."""
    out, outputs = text, []
    for m in re.finditer(r"^[ \t]*```([\w-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", text, re.S | re.M):
        if m.group(1) in ("", "text", "output", "console"):
            out = _blank(_blank(out, m.start(), m.start(2)), m.end(2), m.end())  # the fences
            outputs.append((m.start(2), m.end(2)))
        else:
            out = _blank(out, m.start(), m.end())
    for pattern in (r"<!--.*?-->", r"`(?:[^`\n]|\n(?!\n))+`", r"\]\([^)\s]*\)", r"<?https?://[^\s>]+>?"):
        for m in re.finditer(pattern, out, re.S):
            out = _blank(out, m.start(), m.end())
    return out, outputs


def header_lines(text: str) -> int:
    """How many characters the comment block a YAML file starts with takes."""
    end = 0
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        end += len(line)
    return end


def _mask_yaml_header(text: str) -> str:
    """A scenario header with its commands and settings (`--set key=value`, `simapf run ...`)
    turned into NULs: the prose and the comments beside the commands are left."""
    end = header_lines(text)
    out = _blank(text, end, len(text))
    for m in re.finditer(r"^#([^\n]*)$", out[:end], re.M):
        body, base = m.group(1), m.start(1)
        # A command runs from `simapf` or `--set` to an inner comment (`  #`) or the line's end,
        # over the lines a trailing backslash continues it to.
        for c in re.finditer(r"(?:^|(?<=\s))(?:simapf (?:run|compare|sweep|optimize|figures|export|import|calibrate|"
                             r"replay|apf-report|cache|compile)\b|--set\s|--\w)[^#]*", body):
            out = _blank(out, base + c.start(), base + c.end())
        for c in re.finditer(r"\S*=\S*", body):  # key=value, as commands and rows spell them
            out = _blank(out, base + c.start(), base + c.end())
    prev_continued = False
    for m in re.finditer(r"^#([^\n]*)$", text[:end], re.M):
        if prev_continued:
            out = _blank(out, m.start(1), m.end(1))
        prev_continued = m.group(1).rstrip().endswith("\\")
    return out


def scan(path: Path) -> list[Number]:
    """Every number of a document that is read, quantities and names alike."""
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    masked, outputs = _mask_md(text) if path.suffix == ".md" else (_mask_yaml_header(text), [])
    found: list[Number] = []
    for m in NUMBER.finditer(masked):
        if "\x00" in m.group():
            continue
        line_start = masked.rfind("\n", 0, m.start()) + 1
        if any(a <= m.start() < b for a, b in outputs):
            where = "output"
        else:
            where = "table" if masked[line_start:].lstrip().startswith("|") else "prose"
        unit = UNIT.match(masked, m.end())
        found.append(Number(rel, m.start(), m.end(), m.group(), unit.group(1) if unit else "", where))
    return found


def _kubernetes_release(digits: str, before: str, after: str) -> bool:
    """Kubernetes releases 1.20 to 1.49 are what a "1.NN" is in these documents ("since 1.33",
    "1.34+", "(1.31–1.33)"), unless a unit or a ratio says otherwise ("1.36x", "1.15 -> 1.28")."""
    if not re.fullmatch(r"1\.[2-4]\d", digits):
        return False
    if re.search(r"1\.[2-4]\d\s?(?:to|and|or|-|–)\s?$", before) or re.match(r"(?:\+|[–-]1\.|\s(?:to|and|or)\s1\.|\son\b)", after):
        return True  # one end of a range of releases, or "1.30 on"
    quantity_after = re.match(r"(?:'s)?\s?(?:x\b|×|times\b|%|[KMGT]i?B\b|cores?\b|m?s\b|seconds?\b|->|→|[-–]\d)", after)
    quantity_before = re.search(r"(?:->|→|[x×]|\bto|\bfrom|\bor|\band|\|\s?\**)\s?$", before)  # a ratio, a table cell
    return not (quantity_after or quantity_before)


def not_a_quantity(number: Number, text: str) -> str | None:
    """Why a number is a name, a label or a reference rather than a quantity; None for a quantity."""
    a, b = number.start, number.end
    before, after = text[max(0, a - 40) : a], text[b : b + 12]
    if before[-1:].isalnum() or before[-1:] in "_" or re.match(r"[A-Za-z_][\w]*[^\w\s/%×µ.,;:)'\"-]", after) \
            or (after[:1].isalpha() and not UNIT.match(after)):  # fmt: skip
        return "part of a name"
    if re.search(r"\b[A-Z][A-Z0-9]+-$|\b[a-z]+-$", before):  # SHA-256, UTF-8, KEP-3157, node-3
        return "part of a name"
    if re.search(r"\bexit (?:status|code)\s\**$", before):
        return "an exit status"
    if re.search(r"[A-Za-z_]\.$", before) and re.match(r"\.\w", after):
        return "part of a name"
    if re.search(r"\b[Ss]eeds? (?:\d+(?:, | and | or |-|–))*$", before):
        return "a seed: the name of a run's random streams"
    if before.endswith('"') and after.startswith('"') or re.search(r"\bRV\s$", before):
        return "a literal, as typed"  # resourceVersion "0"
    if re.search(r"(?:^|[\s(>])\*?[A-Za-z]\*?(?:</?sub>)?\s?[−+=<>]\s?$|\b(?:min|max|ceil)\($", before) \
            or re.match(r"\s?[−+]\s?\*?[a-z]\b", after):  # fmt: skip
        return "part of a formula"  # N + 1, N = 0, r > 0, t with n−1
    if re.search(r"\b(?:[Rr]eplications?|[Tt]rials?) (?:\d+(?:, | and | or |-|–))*$", before):
        return "the index of a replication or a trial"
    if re.search(r"\w\[$", before) or before.endswith("="):
        return "an index or a setting, as typed"
    if re.search(r"[A-Za-z][\w-]*/$", before) and not re.search(r"\d\s*/$", before):
        return "part of a name"
    for m in HASH.finditer(text, max(0, a - 40), min(len(text), b + 40)):
        if m.start() <= a and b <= m.end():
            return "a commit"
    if "," not in number.text and " " not in number.text and "." not in number.text and len(number.text) >= 7:
        return "a commit or a timestamp"
    for m in DATE.finditer(text, max(0, a - 20), min(len(text), b + 20)):
        if m.start() <= a and b <= m.end():
            return "a date"
    if re.fullmatch(r"\d+\.\d+\.\d+", number.text + re.match(r"(?:\.\d+)*", after).group()) or \
            (before.endswith(".") and re.search(r"\d\.\d+\.$", before)):  # fmt: skip
        return "a version"
    if re.fullmatch(r"1\.[1-4]\d|3\.1\d|3\.\d", number.text) and VERSION_WORD.search(before):
        return "a version"
    if _kubernetes_release(number.text, before, after):
        return "a version"
    if ISSUE_WORD.search(before):
        return "an issue or pull request"
    if SECTION_WORD.search(before):
        return "a section or a step"
    line_start = text.rfind("\n", 0, a) + 1
    if (LIST_LABEL.match(text[line_start:a]) and re.match(r"[.)]\s", after)) or (before.endswith("(") and re.match(r"\)\s", after)
                                                                           and re.search(r"(?:^|[.:;]\s)\($", before)):
        return "a list item's label"
    # 429 and 410 count nothing here: "a 429", "answered 429", "429s", "410 Gone" (but "429 requests" do)
    if number.text in STATUS_CODES and not re.match(r"\s(?:requests|responses|calls|errors|GETs|LISTs)\b", after):
        return "an HTTP status code"
    return None


# ------------------------------------------------------------------------------ the machine's own
# A time or a speed depends on the machine that ran it. Such a number is exempt when the words
# around it say so: its sentence (for a table, the table's header and the paragraph before it;
# for an output block, the paragraph before it) names the wall time or the machine.
MACHINE = re.compile(
    r"wall[ -]?(?:time|s\b|clock|-clock)|\bon (?:this|that|your|the|a|one|two|an?other)\b[\w\s-]{0,30}?"
    r"\b(?:machine|VM|cores?)\b|\bthis (?:machine|VM)\b|\bmachine(?:'s)? above\b|\bmeasured on\b|\bon \d+ cores\b|\bone core of an?\b",
    re.I,
)
MACHINE_SIZE = re.compile(r"^(?:-core\b|\s?vCPUs?\b|\s?cores?\b|\s?workers?\b|\sGiB of memory)")  # the machine itself: "a 2-core machine"
TIME_UNIT = re.compile(r"^(?:wall\b|s|ms|µs|us|ns|min|minutes?|seconds?|h|hours?|days?)\b")
SPEED = re.compile(r"^\s*(?:[\w-]+\s){0,2}?(?:/\s*(?:wall\s)?s\b|a second\b|per (?:wall )?second\b|/s\b|an hour\b)")
RANGE = re.compile(r"^\s*(?:→|–|-|to|->)\s*" + NUMBER.pattern)


def machine_dependent(number: Number, text: str) -> bool:
    """Whether a number is a time or a speed that its own words name as the machine's."""
    after = text[number.end : number.end + 40]
    more = RANGE.match(after)  # the first of a range or a before → after takes the last one's unit
    tail = after[more.end() :] if more else after
    unit = UNIT.match(tail)
    timed = bool(unit and TIME_UNIT.match(unit.group(1))) or bool(SPEED.match(tail)) or bool(MACHINE_SIZE.match(after))
    if number.where == "table":
        header, caption, column = _table(text, number)
        # A column of times or speeds, or the ratio of two (a table whose header names wall time).
        ratio = bool(re.search(r"\bratio\b|\bspeed-?up\b|×|\bx\b", column)) and bool(MACHINE.search(header))
        return bool((timed or ratio or TIME_UNIT.match(column) or SPEED.match(" x " + column) or MACHINE.search(column))
                    and MACHINE.search(header + "\n" + caption))  # fmt: skip
    return timed and bool(MACHINE.search(_scope(text, number)))


def _scope(text: str, number: Number) -> str:
    """The sentence a number stands in; for an output block, the paragraph before it as well."""
    a, b = number.start, number.end
    start = max(text.rfind("\n\n", 0, a), *(text.rfind(p, 0, a) for p in (". ", ".\n", "; "))) + 1
    ends = [i for i in (text.find(p, b) for p in (". ", ".\n", "\n\n", "; ")) if i >= 0]
    scope = text[start : min(ends) if ends else len(text)]
    if number.where == "output":
        fence = text.rfind("```", 0, a)
        scope += text[max(0, text.rfind("\n\n", 0, max(0, fence - 1))) : fence]
    return scope


def _table(text: str, number: Number) -> tuple[str, str, str]:
    """A table cell's table header, the paragraph before the table, and the cell's column header."""
    lines = text[: number.start].split("\n")
    row = lines[-1]
    i = len(lines) - 1
    while i > 0 and lines[i - 1].lstrip().startswith("|"):
        i -= 1
    header = lines[i]
    j = i
    while j > 0 and lines[j - 1].strip():
        j -= 1
    caption = "\n".join(lines[max(0, j - 12) : i])  # the paragraph (and its neighbour) before the table
    column = row.count("|") - 1
    heads = [h.strip() for h in header.strip().strip("|").split("|")]
    return header, caption, heads[column] if 0 <= column < len(heads) else ""


# ------------------------------------------------------------------------------------ records
# A record is a figure of a run made on a named day at a named commit: an earlier fit, a
# benchmark run. Its words say when and at what, for its whole section (the heading names the
# day, the section a commit) or for its own paragraph (the paragraph names both; for a table,
# its header, the paragraph before it and its row; for an output block, the paragraph before
# it). A record is not checked against today's code: it says what that commit gave that day,
# and a later model gives other figures without making it wrong.
DAY = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
HEADING = re.compile(r"^#{1,6}[ \t].*$", re.M)
PARAGRAPH_START = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*(?:[-*]|\d+\.)[ \t])")  # a blank line, or a list item


@dataclass(frozen=True)
class Record:
    day: str
    commits: tuple[str, ...]  # every commit its words name: one at least is of this repository's history


def record(number: Number, text: str) -> Record | None:
    """The day and the commits a number is a record of, where its words name both; None otherwise."""
    if not number.doc.endswith(".md"):
        return None
    start, end, heading = _section(text, number.start)
    day = DAY.search(heading)
    commits = _section_commits(text, start, end) if day else ()
    if day and commits:
        return Record(day.group(), commits)
    scope = _record_scope(text, number, start)
    day, commits = DAY.search(scope), _commits(scope)
    return Record(day.group(), commits) if day and commits else None


def _commits(words: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group() for m in HASH.finditer(words)))


@functools.lru_cache(maxsize=256)
def _section_commits(text: str, start: int, end: int) -> tuple[str, ...]:
    return _commits(text[start:end])


@functools.lru_cache(maxsize=8)
def _headings(text: str) -> tuple[list[int], list[str]]:
    """Where each heading of a document starts, and its line (headings in code blocks are not)."""
    masked, _outputs = _mask_md(text)
    found = [(m.start(), text[m.start() : m.end()]) for m in HEADING.finditer(masked)]
    return [a for a, _h in found], [h for _a, h in found]


def _section(text: str, offset: int) -> tuple[int, int, str]:
    """The section an offset lies in: from its heading to the next heading, with its heading."""
    starts, lines = _headings(text)
    i = bisect.bisect_right(starts, offset) - 1
    end = starts[i + 1] if i + 1 < len(starts) else len(text)
    return (starts[i], end, lines[i]) if i >= 0 else (0, end, "")


def _paragraph(text: str, a: int, b: int, lo: int) -> str:
    """The paragraph (or list item) around offsets a to b, which starts at `lo` at the earliest."""
    starts = [m.end() for m in PARAGRAPH_START.finditer(text, lo, a)]
    start = starts[-1] if starts else lo
    following = PARAGRAPH_START.search(text, b)
    return text[start : following.start() if following else len(text)]


def _record_scope(text: str, number: Number, lo: int) -> str:
    """The words a number's own record names its day and commit in (`lo`: where its section starts)."""
    if number.where == "table":
        row_start = text.rfind("\n", 0, number.start) + 1
        row_end = text.find("\n", number.end)
        table_start = row_start
        while table_start > 0 and text[text.rfind("\n", 0, table_start - 1) + 1 :].lstrip().startswith("|"):
            table_start = text.rfind("\n", 0, table_start - 1) + 1
        header = text[table_start : text.find("\n", table_start)]
        caption = _paragraph(text, max(lo, table_start - 2), max(lo, table_start - 2), lo)
        return "\n".join((caption, header, text[row_start : row_end if row_end >= 0 else len(text)]))
    if number.where == "output":
        fence = text.rfind("```", 0, number.start)
        return _paragraph(text, max(lo, fence - 2), max(lo, fence - 2), lo)
    return _paragraph(text, number.start, number.end, lo)
