"""Pretty-printed JSON answers, as kube-apiserver's negotiation chooses them (``isPrettyPrint``).

An answer is indented (two spaces, as Go's ``json.MarshalIndent``) when the request says
``?pretty`` with a value ``strconv.ParseBool`` reads as true, or, without a value there,
when its ``User-Agent`` is a browser's or a command-line tool's (``curl``, ``Wget``,
``Mozilla/5.0``)::

    pretty_asked(b"pretty=true", b"kubectl/v1.34")   # True
    pretty_asked(b"pretty=0", b"curl/8.5.0")         # False: the parameter decides
    pretty_asked(b"", b"curl/8.5.0")                 # True

Only whole JSON answers are rewritten (objects, lists, discovery documents, errors); a
watch's stream, YAML, protobuf and text go as they are, as upstream's stream encoders
and other serializers have no pretty form. The check costs a prefix test of the agent
and a substring test of the query on every request; the rewrite, a parse and a dump of
the answer, only the requests that ask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import orjson

from .rewriting import Send, rewriting_writer

__all__ = ["PRETTY_AGENTS", "pretty_asked", "pretty_writer"]

PRETTY_AGENTS = (b"curl", b"Wget", b"Mozilla/5.0")
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))  # strconv.ParseBool's; anything else is not true


def pretty_asked(query_string: bytes, agent: bytes) -> bool:
    """Whether upstream would pretty-print the answer to a request with this query and
    ``User-Agent`` (see the module's docstring)."""
    if b"pretty" in query_string:
        values = parse_qs(query_string.decode("latin-1"), keep_blank_values=True).get("pretty")
        if values and values[0]:
            return values[0] in _TRUE
    return agent.startswith(PRETTY_AGENTS)


def pretty_writer(send: Send, streaming: Callable[[], bool]) -> Send:
    """``send``, with a JSON answer indented; an answer that is not JSON, or one
    ``streaming()`` says is a stream (a watch) when it starts, goes as it is."""

    def takes(start: dict[str, Any]) -> bool:
        return not streaming() and any(k == b"content-type" and v.startswith(b"application/json")
                                       for k, v in start.get("headers") or [])

    def indented(start: dict[str, Any], whole: bytes) -> tuple[dict[str, Any], bytes]:
        if not whole:  # (a HEAD's, a 304's: its headers as they were)
            return start, whole
        with contextlib.suppress(orjson.JSONDecodeError):  # (not JSON after all, or past 64 bits: as it is)
            whole = orjson.dumps(orjson.loads(whole), option=orjson.OPT_INDENT_2)
        headers = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
        return {**start, "headers": [*headers, (b"content-length", str(len(whole)).encode())]}, whole

    return rewriting_writer(send, takes, indented)
