"""The request types APF and the resource model key their caches by."""

from __future__ import annotations

import copy
import dataclasses
import pickle

from simapf.apf.types import ListOptions, RequestAttributes, WorkEstimate


def test_list_options_hash_every_field():
    # ListOptions writes its own __hash__ (so the compiled core compiles it): it must stay the
    # hash of all its fields, as dataclass's would be, or options differing in a new field collide.
    base = ListOptions()
    for f in dataclasses.fields(ListOptions):
        changed = dataclasses.replace(base, **{f.name: "x" if f.type != "int" else 7})
        assert hash(changed) == hash(dataclasses.astuple(changed)), f.name
        assert hash(changed) != hash(base), f.name


def test_request_types_pickle_and_copy_to_equal_objects():
    attrs = RequestAttributes("u", ("g",), "list", list_options=ListOptions(limit=5, label_selector="a=b"))
    estimate = WorkEstimate(3, 1, 2_000)
    for obj in (attrs, attrs.list_options, estimate):
        assert pickle.loads(pickle.dumps(obj)) == obj
        assert copy.deepcopy(obj) == obj and copy.copy(obj) == obj
