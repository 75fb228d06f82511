"""The request-scoped directive and warnings of ``fieldValidation``, without a server."""

from __future__ import annotations

import copy
import random

import orjson
import pytest

from controlplane.api.errors import ApiError
from controlplane.api.fieldvalidation import add_warning, check_object, go_value, request_scope, warning_headers
from controlplane.podgen import PodGenerator
from controlplane.registry import Registry

CONFIGMAPS = Registry().get("", "v1", "configmaps")


def scope(method: str, query: bytes = b"") -> dict[str, object]:
    return {"method": method, "query_string": query}


def test_warnings_are_quoted_as_rfc_7234_and_scoped_to_the_request() -> None:
    add_warning("outside any request: dropped")
    with request_scope(scope("POST")):
        add_warning('unknown field "a\\b"')
        add_warning('unknown field "a\\b"')  # once per response
        assert warning_headers() == [(b"warning", b'299 - "unknown field \\"a\\\\b\\""')]
        with request_scope(scope("GET")):
            assert warning_headers() == []
    assert warning_headers() == []


@pytest.mark.parametrize(("query", "expect"), [
    (b"", "warned"), (b"fieldValidation=Warn", "warned"), (b"fieldValidation=", "warned"),
    (b"pretty=1&fieldValidation=Ignore", "silent"), (b"fieldValidation=Strict", "refused"),
])
def test_the_directive_comes_from_the_query(query: bytes, expect: str) -> None:
    assert CONFIGMAPS is not None
    with request_scope(scope("PUT", query)):
        if expect == "refused":
            with pytest.raises(ApiError) as e:
                check_object(CONFIGMAPS, {"metadata": {"name": "c"}, "extra": 1})
            assert e.value.code == 400
            return
        obj = check_object(CONFIGMAPS, {"metadata": {"name": "c"}, "extra": 1})
        assert "extra" not in obj
        assert (warning_headers() != []) == (expect == "warned")


def test_an_unknown_directive_names_the_options_of_the_verb() -> None:
    assert CONFIGMAPS is not None
    for method, kind in (("POST", "CreateOptions"), ("PUT", "UpdateOptions"), ("PATCH", "PatchOptions")):
        with request_scope(scope(method, b"fieldValidation=strict")), pytest.raises(ApiError) as e:
            check_object(CONFIGMAPS, {"metadata": {"name": "c"}})
        assert e.value.code == 422 and e.value.message.startswith(f'{kind}.meta.k8s.io "" is invalid: ')


def test_mangled_pods_get_a_status_or_pass_never_another_exception() -> None:
    pods = Registry().get("", "v1", "pods")
    assert pods is not None
    rng = random.Random(7)
    base = PodGenerator(seed=7).pod()
    junk: list[object] = [None, 1, 2.5, True, "s", [], {}, [1, "a"], {"x": {"y": [None]}}]

    def mangle(node: object) -> None:
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
            if rng.random() < 0.3:
                node[key] = copy.deepcopy(rng.choice(junk))
            else:
                mangle(node[key])
        elif isinstance(node, list) and node:
            i = rng.randrange(len(node))
            if rng.random() < 0.3:
                node[i] = copy.deepcopy(rng.choice(junk))
            else:
                mangle(node[i])

    outcomes = set()
    for i in range(300):
        obj = copy.deepcopy(base)
        for _ in range(rng.randint(1, 4)):
            mangle(obj)
        body = orjson.dumps(obj)
        directive = (b"Strict", b"Warn", b"Ignore")[i % 3]
        with request_scope(scope(("POST", "PUT", "PATCH")[i % 3], b"fieldValidation=" + directive)):
            try:
                check_object(pods, orjson.loads(body), body)
                outcomes.add(200)
            except ApiError as e:
                outcomes.add(e.code)
    assert outcomes <= {200, 400, 422} and len(outcomes) > 1


def test_object_keys_of_a_merge_patch() -> None:
    from controlplane.api.fieldvalidation import _object_keys

    def recursive(value: object) -> int:  # the reference: how it was first written
        if isinstance(value, dict):
            return len(value) + sum(recursive(v) for v in value.values())
        if isinstance(value, list):
            return sum(recursive(v) for v in value)
        return 0

    rnd = random.Random(3)

    def tree(depth: int) -> object:
        r = rnd.random()
        if depth > 5 or r < 0.3:
            return rnd.choice(["s", 1, None, True, {}, []])
        if r < 0.65:
            return {str(i): tree(depth + 1) for i in range(rnd.randint(0, 4))}
        return [tree(depth + 1) for _ in range(rnd.randint(0, 4))]

    for _ in range(2000):
        value = tree(0)
        assert _object_keys(value) == recursive(value)


@pytest.mark.parametrize(("value", "printed"), [
    ({"b": [1, 2.5, None, True], "a": {}}, "map[a:map[] b:[1 2.5 <nil> true]]"),
    ({"s": "3", "f": 3.0}, "map[f:3 s:3]"),
    ([1e6, 100000.0, 1234567.0, 0.0001, 1e-05, -2.5, 1e21], "[1e+06 100000 1.234567e+06 0.0001 1e-05 -2.5 1e+21]"),
])
def test_a_strategic_patch_is_printed_as_gos_percent_v_prints_its_map(value: object, printed: str) -> None:
    """Go's %v: map keys sorted, strings bare, floats in their shortest digits and in e
    notation for an exponent below -4 or from 6 up."""
    assert go_value(value) == printed


def test_a_yaml_bodys_duplicate_keys_are_reported_with_its_unknown_fields() -> None:
    # go-yaml's strict decoding tells them, which upstream's decoder runs on a YAML body: a
    # warning each under Warn, one error under Strict (they were dropped unseen, the last one kept)
    from controlplane.api.apply import parse_config, yaml_as_json

    assert CONFIGMAPS is not None
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {<<: {x: a}, x: b}\ndata:\n" \
           b"  a: '1'\n  a: '2'\nzz: 1\n"
    with request_scope(scope("POST")):
        obj = orjson.loads(yaml_as_json(body))
        assert check_object(CONFIGMAPS, obj, orjson.dumps(obj))["data"] == {"a": "2"}
        assert warning_headers() == [(b"warning", b'299 - "unknown field \\"zz\\""'),
                                     (b"warning", b'299 - "line 8: key \\"a\\" already set in map"')]
    with request_scope(scope("POST", b"fieldValidation=Strict")):
        obj = orjson.loads(yaml_as_json(body))
        with pytest.raises(ApiError) as e:
            check_object(CONFIGMAPS, obj, orjson.dumps(obj))
    assert e.value.message == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
                               'unknown field "zz", yaml: unmarshal errors:\n  line 8: key "a" already set in map')
    applied = body.replace(b"zz: 1\n", b"")
    with request_scope(scope("PATCH", b"fieldManager=m")):
        assert parse_config(CONFIGMAPS, "default", "c", applied)["data"] == {"a": "2"}
        assert warning_headers() == [(b"warning", b'299 - "line 8: key \\"a\\" already set in map"')]
    with request_scope(scope("PATCH", b"fieldValidation=Strict")), pytest.raises(ApiError) as e:
        parse_config(CONFIGMAPS, "default", "c", applied)
    assert e.value.message == ('error strict decoding YAML: yaml: unmarshal errors:\n'
                               '  line 8: key "a" already set in map')
