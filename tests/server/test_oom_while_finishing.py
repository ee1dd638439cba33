"""A case the random scenarios found, kept as a fast test."""

from __future__ import annotations

from pathlib import Path

import simapf


def test_a_request_the_next_ones_oom_kill_ended_is_answered_once():
    """Finishing a request dispatches the next, which can OOM-kill the process and so end the
    first: it is answered once, and every attempt is accounted for."""
    s = simapf.run(simapf.load_scenario(Path(__file__).parents[1] / "data" / "scenarios" / "oom-while-finishing.yaml"),
                   cache=False).summary  # fmt: skip
    assert [d["reason"] for d in s["deaths"]] == ["oom", "oom"]
    for c in s["clients"]:
        assert c["in_flight_at_end"] >= 0, c["client"]
        assert c["attempts"] == sum(c["outcomes"].values()) + c["retries_after_429"] + c["in_flight_at_end"]
