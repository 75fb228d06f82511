"""Pretty-printed answers (api/pretty.py), chosen as upstream's ``isPrettyPrint`` chooses them."""

from __future__ import annotations

import orjson
import pytest

from controlplane.api.pretty import pretty_asked
from controlplane.client import Client
from controlplane.client.transport import call, open_stream

NAMESPACE = "/api/v1/namespaces/default"


@pytest.mark.parametrize(("query", "agent", "pretty"), [
    (b"pretty=true", b"kubectl/v1.34.0", True),
    (b"pretty=1", b"", True),
    (b"pretty=T", b"", True),
    (b"pretty=yes", b"curl/8.5.0", False),        # not a ParseBool true: the parameter decides, no
    (b"pretty=false", b"curl/8.5.0", False),
    (b"pretty=", b"curl/8.5.0", True),            # no value: the agent decides
    (b"", b"curl/8.5.0", True),
    (b"", b"Wget/1.21", True),
    (b"", b"Mozilla/5.0 (X11)", True),
    (b"", b"python-httpx/0.28", False),
    (b"prettyish=1", b"kubectl", False),
])
def test_who_gets_a_pretty_answer(query: bytes, agent: bytes, pretty: bool) -> None:
    assert pretty_asked(query, agent) is pretty


async def test_objects_lists_discovery_and_errors_are_indented_when_asked(client: Client) -> None:
    headers = [(b"accept", b"application/json")]
    for path in (NAMESPACE, "/api/v1/namespaces", "/api", "/api/v1/namespaces/nope"):
        _, compact, _ = await call(client._app, "GET", path, b"", headers, b"")
        _, indented, _ = await call(client._app, "GET", path, b"pretty=true", headers, b"")
        assert indented == orjson.dumps(orjson.loads(compact), option=orjson.OPT_INDENT_2), path
        assert indented.startswith(b'{\n  "'), path
        _, by_curl, _ = await call(client._app, "GET", path, b"", [*headers, (b"user-agent", b"curl/8.5.0")], b"")
        assert by_curl == indented, path


async def test_a_watch_and_yaml_are_not_rewritten(client: Client) -> None:
    watch = b"watch=1&pretty=true&timeoutSeconds=1"
    status, _, body = await open_stream(client._app, "GET", b"/api/v1/namespaces", watch,
                                        [(b"accept", b"application/json")], b"")
    chunks = aiter(body)
    first = await anext(chunks)
    await body.aclose()
    assert status == 200 and first.startswith(b'{"type":"ADDED","object":{"')  # one event a line, compact
    _, yaml, _ = await call(client._app, "GET", NAMESPACE, b"pretty=true", [(b"accept", b"application/yaml")], b"")
    assert yaml.startswith(b"apiVersion: v1\n")
