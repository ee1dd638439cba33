"""The work estimator knows whether the response it estimates is streamed (upstream reads the
request's negotiated media type): `streamed-cache-cap` caps cache LISTs at the 1 MB cache cap
only when they are streamed, and charges whole-encoded ones by their size."""

from __future__ import annotations

import simapf

# Cache-served LISTs of 3 MB (30 seats of 100 KB) from a service account: workload-low, whose
# LISTs may take up to 49 seats on this 800-seat apiserver.
CACHE_3MB = {"run.duration_s": 3, "clients.lister.rate_per_s": 20, "resources.0.count": 100,
             "resources.0.object_size.mean_bytes": 30_000,
             "clients.lister.identity": {"service_account": "tenants/lister"},
             "clients.lister.request.options.resource_version": "0"}  # fmt: skip


def _seats(streamed: bool) -> dict[str, float]:
    over = {**CACHE_3MB, "kubernetes.feature_gates.StreamingCollectionEncodingToJSON": streamed}
    cmp = simapf.compare("scenarios/list-experiment.yaml", ["upstream", "streamed-cache-cap"], replications=1,
                         overrides=over, workers=1)  # fmt: skip
    return dict(cmp.side_by_side().loc["seats_per_list_mean"])


def test_streamed_cache_cap_charges_whole_responses_by_size():
    streamed, whole = _seats(True), _seats(False)
    # Streamed: both policies cap the LIST at the cache cap (1 MB / 100 KB = 10 seats).
    assert streamed["upstream"] == streamed["streamed-cache-cap"] == 10
    # Encoded whole: upstream still caps it; the policy charges its size (3 MB / 100 KB).
    assert whole["upstream"] == 10
    assert whole["streamed-cache-cap"] == 30


def test_compare_warns_when_the_policies_cannot_be_told_apart():
    # 100 KB LISTs: one seat under either policy, so the runs are the same run for run.
    same = simapf.compare("scenarios/list-experiment.yaml", ["upstream", "size-based"], replications=1,
                          overrides={"run.duration_s": 2}, workers=1)  # fmt: skip
    assert "behaved identically" in same.info["identical"] and "1 seat," in same.info["identical"]
    assert "warning: the policies upstream, size-based behaved identically" in same.text()
    differ = simapf.compare("scenarios/list-experiment.yaml", ["upstream", "constant:seats=4"], replications=1,
                            overrides={"run.duration_s": 2}, workers=1)  # fmt: skip
    assert differ.info["identical"] == "" and "warning" not in differ.text()
