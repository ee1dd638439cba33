"""Every number in README.md, docs/ and the scenarios' headers is generated from a run or checked.

The documents' numbers are found by `docnumbers.scan`; each is a name rather than a quantity, a
time its words name as the machine's, part of a generated block, or registered in docs/numbers/
with its source (`docnumbers.registry`). The fast test fails on any number nothing accounts for,
and checks every registered number whose source is a file or a quick run; the slow one runs the
rest. A change of the model that moves them rewrites them: `python tests/docnumbers --write`.
"""

from __future__ import annotations

import textwrap

import pytest

from docnumbers import scan
from docnumbers.registry import Document, Entry, Generated, Registry, documents, load_pending, render, rewrite
from docnumbers.sources import RunSpec, Runs

REWRITE = "rewrite them from runs: python tests/docnumbers --write"



@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load()


@pytest.fixture(scope="module")
def every_run(registry) -> Runs:
    """The registry's runs, each run once for the module (the suite turns the result cache off:
    conftest.py); `python tests/docnumbers` reads them from the cache instead."""
    return Runs(registry.runs)


def test_every_number_in_the_documents_is_generated_registered_or_not_a_quantity(registry):
    pending = load_pending()
    problems = [p for d in documents(registry) if d.rel not in pending for p in d.unaccounted()]
    assert not problems, "register each in docs/numbers/ (docs/numbers/README.md):\n" + "\n".join(map(str, problems))


def test_the_documents_not_yet_registered_have_exactly_the_numbers_their_count_says(registry):
    # docs/numbers/pending.yaml: a count that only goes down. A new number in one of these
    # documents is registered like any other; one registered lowers the count.
    pending = load_pending()
    counts = {d.rel: len(d.unaccounted()) for d in documents(registry) if d.rel in pending}
    assert set(counts) == set(pending), "pending.yaml names a document that is not scanned"
    wrong = {doc: f"{n} unaccounted, pending.yaml says {pending[doc]}" for doc, n in counts.items() if n != pending[doc]}
    assert not wrong, f"register the new numbers, or lower the counts in docs/numbers/pending.yaml: {wrong}"


def test_the_registered_numbers_are_their_sources_quick_runs_included(registry, every_run):
    # The quick runs are the slow check's too: they share what was run.
    runs = Runs(registry.runs, {n for n, r in registry.runs.items() if not r.slow}, done=every_run._done)
    problems = [p for d in documents(registry) for p in d.disagreements(runs)[0]]
    assert not problems, f"{REWRITE}\n" + "\n".join(map(str, problems))


@pytest.mark.slow
def test_the_registered_numbers_are_their_sources_every_run(registry, every_run):
    problems = [p for d in documents(registry) for p in d.disagreements(every_run)[0]]
    assert not problems, f"{REWRITE}\n" + "\n".join(map(str, problems))


def test_every_registered_run_is_used_and_every_document_has_a_registry(registry):
    used = "\n".join(v for e in registry.entries for v in (*e.values, e.holds or ""))
    used += "\n".join(g.value or "" for g in registry.generated)
    assert not [name for name in registry.runs if f'run["{name}"]' not in used]
    registered = {e.doc for e in registry.entries} | {g.doc for g in registry.generated} | set(load_pending())
    with_numbers = {d.rel for d in documents(registry) if any(not scan.not_a_quantity(n, d.text) for n in d.numbers)}
    assert with_numbers <= registered


# ---------------------------------------------------------------------------- the mechanism itself


@pytest.fixture
def doc(tmp_path, monkeypatch):
    """A document of a scratch checkout, and a registry for it."""
    monkeypatch.setattr(scan, "ROOT", tmp_path)
    import docnumbers.registry as registry_module
    import docnumbers.sources as sources_module

    monkeypatch.setattr(registry_module, "ROOT", tmp_path)
    monkeypatch.setattr(sources_module, "ROOT", tmp_path)
    (tmp_path / "params.yaml").write_text("limit_bytes: 4294967296\ncount: 1775\n")

    def make(text: str, *entries: tuple[str, tuple[str, ...]], holds: str | None = None) -> Document:
        path = tmp_path / "guide.md"
        path.write_text(textwrap.dedent(text))
        items = [Entry("guide.md", at, values, None, None, holds, "test") for at, values in entries]
        return Document(path, Registry(items, [], {}))

    return make


def test_a_number_nothing_accounts_for_is_found_where_it_stands(doc):
    d = doc("The storm peaked at 1.9 GB, twice.\n")
    (problem,) = d.unaccounted()
    assert (problem.line, "1.9 GB (prose)") == (1, problem.message[:14])


def test_names_labels_and_references_are_not_quantities(doc):
    d = doc("""\
        ## 5. Change it

        1. Kubernetes 1.37 (v1.37.0), since 1.33, commit 6ee3d3e, on 2026-11-28, issue 24,
           kubernetes#111477, KEP-3157, §3, HTTP 429, 410 Gone, p99, x86_64, seed 4, `--set n=600`,
           notebooks 02 and 03:
        ```sh
        simapf run --set apiserver.cores=16
        ```
        """)
    assert d.unaccounted() == []


def test_a_time_is_exempt_only_where_its_words_name_it_the_machines(doc):
    d = doc("The run took 4.2 wall s. A run takes 3 s on this machine. The outage lasts 90 s.\n")
    (problem,) = d.unaccounted()
    assert problem.message.startswith("90 s ")


def test_a_table_of_times_is_exempt_when_its_caption_names_the_machine(doc):
    d = doc("""\
        Measured on the machine above:

        | run | wall s | requests |
        |---|---:|---:|
        | a | 4.2 | 17 923 |
        """)
    assert [p.message.split(" (")[0] for p in d.unaccounted()] == ["17 923"]


def test_a_record_is_a_section_or_a_paragraph_that_names_its_day_and_its_commit(doc):
    d = doc("""\
        ## What the fit gives

        The cost is 0.83.

        ### 2026-11-25: a refit

        *Recorded in cb99685.*

        The cost went from 0.99 to 0.97 and the worst cell to 75 %.

        ### A refit, undated

        The cost went to 0.96 (cb99685).

        The cost went to 0.95 on 2026-11-26 at 4dd9a3f.

        On 2026-11-27 a scan moved it by 3 %.

        Measured 2026-11-28 at 234d3f8:

        | run | requests |
        |---|---:|
        | a | 17 923 |
        """)
    unaccounted = [p.message.split(" (")[0] for p in d.unaccounted()]
    assert unaccounted == ["0.83", "0.96", "3 %"]
    record = scan.record(next(n for n in d.numbers if n.text == "17 923"), d.text)
    assert record == scan.Record("2026-11-28", ("234d3f8",))


def test_every_record_names_a_commit_of_this_repository(registry):
    # A record's commit is what made its figures: one that is not in the history names nothing.
    import subprocess

    git = ["git", "-C", str(scan.ROOT)]
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if shallow.returncode or shallow.stdout.strip() != "false":
        pytest.skip("not a whole git checkout: the records' commits cannot be looked up")
    named: dict[tuple[str, ...], str] = {}
    for d in documents(registry):
        for n in d.numbers:
            record = scan.record(n, d.text)
            if record:
                named.setdefault(record.commits, f"{d.rel}:{n.line(d.text)}")
    commits = sorted({c for cs in named for c in cs})
    found = subprocess.run([*git, "cat-file", "--batch-check"], input="".join(f"{c}^{{commit}}\n" for c in commits),
                           capture_output=True, text=True, check=True).stdout.splitlines()  # fmt: skip
    known = {c for c, line in zip(commits, found) if not line.endswith(" missing")}
    assert named and not [f"{where}: {', '.join(cs)}" for cs, where in named.items() if not set(cs) & known]


def test_a_registered_number_is_checked_against_its_source_and_rewritten(doc):
    d = doc("A limit of 3 GiB, and 1,775 informers.\n",
            ("A limit of {} GiB, and {} informers", ('data["params.yaml"].limit_bytes / 2**30', 'data["params.yaml"].count')))
    assert d.unaccounted() == []
    problems, edits = d.disagreements(Runs({}))
    assert [p.message.split(" in ")[0] for p in problems] == ["3"]
    assert rewrite([d], Runs({})) == ["guide.md"]
    assert d.path.read_text() == "A limit of 4 GiB, and 1,775 informers.\n"


def test_words_that_are_not_in_the_document_once_are_a_problem(doc):
    d = doc("at 1 GB and at 2 GB\n", ("at {} GB", ('data["params.yaml"].count',)))
    assert "2 times, not once" in str(d.disagreements(Runs({}))[0][0])


def test_a_conclusion_the_source_does_not_draw_is_a_problem(doc):
    d = doc("Both fit in 4 GiB.\n", ("Both fit in {} GiB", ('data["params.yaml"].limit_bytes / 2**30',)),
            holds='data["params.yaml"].count < 1000')
    (problem,) = d.disagreements(Runs({}))[0]
    assert "draws a conclusion" in problem.message


def test_a_generated_block_is_compared_whole_and_rewritten(doc):
    d = doc("Run it:\n\n```\ncount 1\n```\n")
    d.registry.generated.append(Generated("guide.md", "Run it:", None, False, '"count " + str(data["params.yaml"].count) + "\\n"',
                                          None, None, "test"))  # fmt: skip
    assert d.unaccounted() == []
    assert len(d.disagreements(Runs({}))[0]) == 1
    rewrite([d], Runs({}))
    assert "count 1775\n" in d.path.read_text()


def test_a_slow_run_is_left_to_the_slow_check(doc):
    d = doc("It peaked at 1 GB.\n", ("It peaked at {} GB", ('run["big"].memory.peak_rss_bytes / 1e9',)))
    assert d.disagreements(Runs({"big": RunSpec("big", "default", slow=True)}, allowed=set()))[0] == []


@pytest.mark.parametrize(("value", "shown", "want"), [
    (1775066903 / 1e9, "1.9", "1.8"), (1775.06, "1,912", "1,775"), (17923, "19 018", "17 923"),
    (2200, "2400", "2200"), (0.6559, "0.71", "0.66"), (117, "118.0", "117.0"),
    (4.5e-8, "2e-9", "4e-8"), (4.5e-8, "4.5e-8", "4.5e-8"), (2**63 / 1e9, "9.223e+09", "9.223e+09"),
])  # fmt: skip
def test_a_value_is_written_as_the_document_writes_the_number(value, shown, want):
    assert render(value, shown, None) == want
