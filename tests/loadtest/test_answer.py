"""The Locust users' ``Answer``: a response whose body is parsed only when read."""

from __future__ import annotations

import orjson

from loadtest.answer import _UNPARSED, Answer

POD = orjson.dumps({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "42",
                                 "annotations": {"x": '{"metadata":{"resourceVersion":"7"}}'}},
                    "spec": {}, "status": {"phase": "Pending"}})


def test_the_resource_version_is_read_without_parsing_the_body() -> None:
    a = Answer(201, POD, 1.0)
    assert a.rv == "42"
    assert a._body is _UNPARSED
    assert a.body is not None and a.body["status"]["phase"] == "Pending"
    assert a.rv == "42"


def test_bodies_that_are_not_objects_are_none() -> None:
    assert Answer(200, b"", 1.0).body is None
    assert Answer(200, b"[1, 2]", 1.0).body is None
    assert Answer(500, b"{not json", 1.0).body is None
    assert Answer(200, b"ok", 1.0).rv is None


def test_a_list_answers_with_its_own_resource_version() -> None:
    listed = orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"},
                           "items": [orjson.loads(POD)]})
    assert Answer(200, listed, 1.0).rv == "9"
