"""Serving path per the KEP-2340 table (list-memory.md §2.1) and streaming encoding."""

from __future__ import annotations

import pytest

from simapf.apf.types import ListOptions
from simapf.server import (
    Encoding,
    FeatureGates,
    InvalidListOptions,
    ResponseShape,
    ServingPath,
    is_streaming_encoded,
    plan_request,
    serving_path,
)

E, C, SNAP, WL = ServingPath.ETCD, ServingPath.CACHE, ServingPath.CACHE_SNAPSHOT, ServingPath.WATCHLIST_STREAM
OLD_1_33 = FeatureGates(list_from_cache_snapshot=False)
OLD_1_30 = FeatureGates(list_from_cache_snapshot=False, consistent_list_from_cache=False)


@pytest.mark.parametrize(
    "opts, v134, v131, v130",
    [
        # RV "" (consistent), no limit / with a limit
        (ListOptions(), C, C, E),
        (ListOptions(resource_version=""), C, C, E),
        (ListOptions(limit=500), C, C, E),
        # continue token: snapshot in 1.34+, etcd before
        (ListOptions(limit=500, continue_token="abc"), SNAP, E, E),
        # RV "0": cache whatever the limit (the limit is ignored)
        (ListOptions(resource_version="0"), C, C, C),
        (ListOptions(resource_version="0", limit=500), C, C, C),
        (ListOptions(resource_version="0", resource_version_match="NotOlderThan", limit=5), C, C, C),
        # RV X without a limit, or NotOlderThan: cache after waiting for X
        (ListOptions(resource_version="123"), C, C, C),
        (ListOptions(resource_version="123", resource_version_match="NotOlderThan", limit=5), C, C, C),
        # legacy exact (RV X + limit) and Exact
        (ListOptions(resource_version="123", limit=500), SNAP, E, E),
        (ListOptions(resource_version="123", resource_version_match="Exact"), SNAP, E, E),
        (ListOptions(resource_version="123", resource_version_match="Exact", limit=5), SNAP, E, E),
    ],
)
def test_kep_2340_table(opts, v134, v131, v130):
    assert serving_path("list", opts) is v134
    assert serving_path("list", opts, gates=OLD_1_33) is v131
    assert serving_path("list", opts, gates=OLD_1_30) is v130


def test_snapshot_gone_falls_back_to_etcd():
    opts = ListOptions(limit=500, continue_token="abc")
    assert serving_path("list", opts, snapshot_available=False) is E


def test_watch_cache_disabled_always_etcd():
    for opts in (ListOptions(), ListOptions(resource_version="0"), ListOptions(resource_version="9", limit=1)):
        assert serving_path("list", opts, watch_cache_enabled=False) is E
    assert serving_path("watch", ListOptions(send_initial_events=True), watch_cache_enabled=False) is E


def test_cache_not_ready_kep_4568():
    # Limit and no selectors: etcd; anything else: 429 (None).
    assert serving_path("list", ListOptions(limit=10), cache_ready=False) is E
    assert serving_path("list", ListOptions(limit=10, label_selector="a=b"), cache_ready=False) is None
    assert serving_path("list", ListOptions(), cache_ready=False) is None
    assert serving_path("watch", ListOptions(send_initial_events=True), cache_ready=False) is None


def test_watchlist_streams_from_cache():
    opts = ListOptions(send_initial_events=True, resource_version_match="NotOlderThan")
    assert serving_path("watch", opts) is WL


@pytest.mark.parametrize(
    "opts",
    [
        ListOptions(resource_version_match="Exact"),
        ListOptions(resource_version="0", resource_version_match="Exact"),
        ListOptions(resource_version="5", continue_token="x"),
        ListOptions(resource_version="5", resource_version_match="Bogus"),
    ],
)
def test_invalid_options_rejected(opts):
    with pytest.raises(InvalidListOptions):
        serving_path("list", opts)


def test_not_list_or_watch_is_an_error():
    with pytest.raises(ValueError):
        serving_path("get", ListOptions())


@pytest.mark.parametrize(
    "encoding, streamed",
    [
        (Encoding.JSON, True),
        (Encoding.PROTOBUF, True),
        (Encoding.CBOR, False),
        (Encoding.YAML, False),
        (Encoding.TABLE, False),
    ],
)
def test_streaming_encoding_by_encoding(encoding, streamed):
    assert is_streaming_encoded(C, encoding) is streamed
    assert is_streaming_encoded(E, encoding) is streamed
    assert is_streaming_encoded(WL, encoding) is True


def test_streaming_gates_off():
    gates = FeatureGates(streaming_collection_encoding_to_json=False)
    assert is_streaming_encoded(C, Encoding.JSON, gates) is False
    assert is_streaming_encoded(C, Encoding.PROTOBUF, gates) is True


def test_plan_request_combines_path_and_streaming():
    shape = ResponseShape(1e6, 100, Encoding.CBOR)
    cost = plan_request("list", ListOptions(resource_version="0"), shape)
    assert cost is not None and cost.path is C and cost.streaming is False and cost.shape is shape
    assert plan_request("list", ListOptions(), shape, cache_ready=False) is None


def test_shape_defaults_read_equals_returned_and_scales_bytes():
    assert ResponseShape(1000.0, 10).b_read == 1000.0
    filtered = ResponseShape(1000.0, 10, objects_read=40)
    assert filtered.n_read == 40 and filtered.b_read == 4000.0
    assert ResponseShape(1000.0, 10, objects_read=40, bytes_read=123.0).b_read == 123.0


def test_request_cost_is_a_value_and_survives_pickling():
    import pickle

    from simapf.server import RequestCost

    a = RequestCost(C, ResponseShape(1e5, 10))
    b = RequestCost(C, ResponseShape(1e5, 10))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != RequestCost(E, ResponseShape(1e5, 10))
    c = pickle.loads(pickle.dumps(a))
    assert c == a and hash(c) == hash(a)
