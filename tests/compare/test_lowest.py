"""`lowest_peak` names the setting with the lowest peak only where the runs can tell, and says why
not otherwise: the answer cells of the notebooks print it."""

from __future__ import annotations

import pandas as pd

from simapf.comparison.lowest import lowest_peak

GiB = 2**30


def _runs(peaks: dict, kills: dict | None = None, by: str = "policy") -> pd.DataFrame:
    """{setting: [peak of replication 0, 1, ...]}; replication r of every setting on seed r."""
    rows = [{by: s, "replication": r, "seed": 100 + r, "peak_rss_bytes": p,
             "oom_kills": (kills or {}).get(s, [0] * len(v))[r]}
            for s, v in peaks.items() for r, p in enumerate(v)]  # fmt: skip
    return pd.DataFrame(rows)


def test_no_lowest_when_every_run_was_oom_killed():
    # Every cap's peak pinned just under a 6 GiB limit: the kill set them, not the cap.
    caps = {c: [6 * GiB - (c % 7) * 2**20] * 3 for c in (10, 25, 50, 100, 200, 400)}
    answer = lowest_peak(_runs(caps, {c: [2, 3, 2] for c in caps}, by="cap"), by="cap")
    assert answer.setting is None and answer.mean is None
    assert "OOM-killed" in str(answer) and "every cap" in str(answer)


def test_no_lowest_when_the_intervals_include_zero():
    # Two replications whose paired differences disagree in sign: a ±8.5 GB interval.
    runs = _runs({"upstream": [3e9, 12e9], "streamed-cache-cap": [4e9, 11.5e9]})
    answer = lowest_peak(runs, by="policy")
    assert answer.setting is None
    assert "cannot be told apart" in str(answer) and "95 % interval" in str(answer)


def test_no_lowest_from_one_run_each():
    answer = lowest_peak(_runs({"a": [1e9], "b": [2e9]}), by="policy")
    assert answer.setting is None and "ran once" in str(answer)


def test_the_lowest_is_named_when_it_is_below_every_other_with_confidence():
    runs = _runs({"upstream": [2.0e9, 2.4e9, 2.2e9], "a": [1.5e9, 1.9e9, 1.7e9], "b": [1.6e9, 2.0e9, 1.81e9]})
    answer = lowest_peak(runs, by="policy")
    assert answer.setting == "a" and answer.mean == runs[runs["policy"] == "a"]["peak_rss_bytes"].mean()
    assert str(answer).startswith("Lowest peak RSS: policy a")


def test_a_close_runner_up_withholds_the_answer():
    # a is below upstream beyond doubt but not below b, whose paired difference changes sign.
    runs = _runs({"upstream": [2.0e9, 2.4e9, 2.2e9], "a": [1.5e9, 1.9e9, 1.7e9], "b": [1.4e9, 2.0e9, 1.75e9]})
    assert lowest_peak(runs, by="policy").setting is None


def test_settings_with_killed_runs_rank_above_those_without():
    # Cap 400's runs were killed at the limit: their low recorded peak says nothing of the cap.
    runs = _runs({10: [5.0e9, 5.2e9, 5.1e9], 100: [5.5e9, 5.8e9, 5.6e9], 400: [4.0e9, 4.0e9, 4.0e9]},
                 {400: [1, 1, 1]}, by="cap")  # fmt: skip
    answer = lowest_peak(runs, by="cap", named="max seats")
    assert answer.setting == 10
    assert "max seats 10" in str(answer) and "400 had runs OOM-killed" in str(answer)


def test_runs_on_different_seeds_are_compared_unpaired():
    runs = _runs({"a": [1.0e9, 1.1e9, 1.05e9], "b": [2.0e9, 2.1e9, 2.05e9]})
    runs.loc[runs["policy"] == "b", "seed"] += 10
    assert lowest_peak(runs, by="policy").setting == "a"
    runs.loc[runs["policy"] == "b", "peak_rss_bytes"] = [0.5e9, 1.6e9, 1.2e9]  # overlapping spreads
    assert lowest_peak(runs, by="policy").setting is None
