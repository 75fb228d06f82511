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


def test_a_pages_continue_token_is_read_without_parsing_its_items() -> None:
    pod = orjson.loads(POD)
    pod["metadata"]["annotations"]["x"] = '"continue":"not-this"'  # (in an item: never read)
    page = orjson.dumps({"kind": "PodList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": "9", "continue": "eyJydiI6OSwic3RhcnQiOiJwIn0",
                                      "remainingItemCount": 3}, "items": [pod]})
    a = Answer(200, page, 1.0)
    assert a.continue_token == "eyJydiI6OSwic3RhcnQiOiJwIn0"
    assert a._body is _UNPARSED
    last = Answer(200, orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [pod]}), 1.0)
    assert last.continue_token is None and last._body is _UNPARSED
    empty = Answer(200, orjson.dumps({"kind": "PodList", "metadata": {"continue": ""}, "items": []}), 1.0)
    assert empty.continue_token is None
    # items before the metadata (no server writes them so), or no items: the body is parsed
    odd = Answer(200, orjson.dumps({"items": [pod], "metadata": {"continue": "abc"}}), 1.0)
    assert odd.continue_token == "abc"
    assert Answer(200, b'{"metadata": {"continue": "abc"}}', 1.0).continue_token == "abc"
    assert Answer(500, b"{not json", 1.0).continue_token is None
