"""The figures a shipped scenario's header states about its own run are what a run gives.

Each claim is a phrase of the header with a number in it and what the run's summary says there.
The test runs the scenario as shipped and holds each stated number to the run's, within
TOLERANCE or the number's own rounding, whichever is wider. A change of the model that moves
them rewrites them from a run: `python tests/scenario/test_header_figures.py` (and says so in
its commit), never by hand.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

import simapf

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.05  # relative


@dataclass(frozen=True)
class Claim:
    phrase: str  # the header's words, with {} where the number is (they may wrap over comment lines)
    value: Callable[[dict[str, Any]], float]  # the run summary's figure
    digits: int  # decimals the header gives it with

    def pattern(self) -> re.Pattern:
        before, after = (re.escape(part).replace(r"\ ", r"[\s#]+") for part in self.phrase.split("{}"))
        return re.compile(f"{before}(?P<number>[0-9][0-9,]*(?:\\.[0-9]+)?){after}")


CLAIMS: dict[str, list[Claim]] = {
    "scenarios/mixed-cluster.yaml": [
        Claim("peak RSS ~{} GB", lambda s: s["memory"]["peak_rss_bytes"] / 1e9, 1),
        Claim("peak CPU ~{} of 16 cores", lambda s: s["cpu"]["peak_cores"], 1),
        Claim("cores, {} s down", lambda s: s["process"]["down_s"], 0),
        Claim("and {} requests answered 429", lambda s: s["requests"]["by_outcome"]["rejected"], 0),
    ],
    "scenarios/relist-storm.yaml": [
        Claim("the storm peaks at ~{} GB of the 6 GiB limit", lambda s: s["memory"]["peak_rss_bytes"] / 1e9, 1),
        Claim("watching again {} s after the outage", lambda s: s["events"][0]["recovery_s"], 0),
    ],
}


def header(text: str) -> str:
    """The comment lines a scenario file starts with."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[: next(i for i, line in enumerate(lines) if not line.startswith("#"))])


def stated(text: str, claim: Claim) -> re.Match:
    found = list(claim.pattern().finditer(text))
    assert len(found) == 1, f"the header states {claim.phrase!r} {len(found)} times, not once"
    return found[0]


def run_summary(scenario: str) -> dict[str, Any]:
    return simapf.run(simapf.load_scenario(ROOT / scenario)).summary


@pytest.mark.parametrize("scenario", sorted(CLAIMS))
def test_the_headers_figures_are_the_runs(scenario):
    text = header((ROOT / scenario).read_text())
    summary = run_summary(scenario)
    for claim in CLAIMS[scenario]:
        said = float(stated(text, claim)["number"].replace(",", ""))
        ran = claim.value(summary)
        allowed = max(TOLERANCE * abs(ran), 0.5 * 10**-claim.digits)
        assert abs(said - ran) <= allowed, (
            f"{scenario}: the header says {claim.phrase.format(said)!r}, a run gives {ran:.{claim.digits + 2}f}: "
            "rewrite the header's figures from a run with `python tests/scenario/test_header_figures.py`"
        )


def rewrite(scenario: str) -> None:
    """Put a run's figures into the header, each with its claim's decimals."""
    path = ROOT / scenario
    text = path.read_text()
    summary = run_summary(scenario)
    for claim in CLAIMS[scenario]:
        m = stated(header(text), claim)
        number = f"{claim.value(summary):,.{claim.digits}f}"
        text = text[: m.start("number")] + number + text[m.end("number"):]
    path.write_text(text)


if __name__ == "__main__":  # rewrite the headers' figures from runs
    for name in sorted(CLAIMS):
        rewrite(name)
        print("wrote", name, file=sys.stderr)
