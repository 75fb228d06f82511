"""An object's stored form and its served form.

Objects are stored as JSON with ``apiVersion``, ``kind`` and ``metadata`` first and
no ``metadata.resourceVersion``; they are served with the store's revision spliced in
as metadata's first key. Splicing bytes spares a parse and a serialisation per
write and per read. Metadata's collections are stored only when they hold something,
as Go's ``omitempty`` encodes ObjectMeta: kube-apiserver decodes every write into
its struct and encodes it again (custom resources' metadata too), so ``kubectl
label cm x k-`` of the last label leaves no ``labels: {}`` behind.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..gonumbers import go_json, may_hold_whole_floats, whole_floats_written_back

__all__ = ["encode", "metadata_first", "omit_empty", "served_form", "with_resource_version",
           "without_resource_version"]

_META_KEY = b'"metadata":{'
_META_LEN = len(_META_KEY)
_CLOSE = ord("}")
# ObjectMeta's maps and lists, all ``omitempty``: never stored empty (or null)
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def metadata_first(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``apiVersion``, ``kind`` and ``metadata`` as its first keys (Go's field
    order), so the first ``"metadata":{`` of its JSON is its own (see ``with_resource_version``);
    its metadata's empty collections dropped (in place), as Go's encoding drops them."""
    meta = obj["metadata"]
    omit_empty(meta)
    first = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta}
    if list(obj)[:3] == list(first):
        return obj
    first.update((k, v) for k, v in obj.items() if k not in first)
    return first


def encode(obj: dict[str, Any], unstructured: bool) -> bytes:
    """``obj``'s JSON to store. An ``unstructured`` object's (a custom resource's) is written
    as kube-apiserver writes the unstructured object it decoded: a whole float (``80.0``, a
    float64 while the request lasted, which its validation saw) is written ``80`` and read
    back as the int it then is (in ``obj`` too, which the write's response is made of);
    ``gonumbers.written_back``. Its other floats are written as Go writes them too (``1e+20`` is
    ``100000000000000000000``: ``gonumbers.go_json``). The common object holds none: a few byte
    scans."""
    stored = orjson.dumps(obj)
    if unstructured:
        if may_hold_whole_floats(stored) and whole_floats_written_back(obj):
            stored = orjson.dumps(obj)
        stored = go_json(stored)
    return stored


def omit_empty(meta: dict[str, Any]) -> None:
    """``meta`` (an object's metadata) without its empty (or null) collections, in place."""
    for field in _OMITTED_WHEN_EMPTY:
        if field in meta and not meta[field]:
            del meta[field]


def with_resource_version(stored: bytes, revision: int) -> bytes:
    """Stored JSON (metadata after apiVersion and kind, no resourceVersion) as served at
    ``revision``: ``"resourceVersion":"N"`` spliced in as metadata's first key."""
    at = stored.index(_META_KEY) + _META_LEN
    # one join, the brace compared as an int: every write's served form is made here
    if stored[at] == _CLOSE:
        return b"".join((stored[:at], b'"resourceVersion":"%d"' % revision, stored[at:]))
    return b"".join((stored[:at], b'"resourceVersion":"%d",' % revision, stored[at:]))


def served_form(stored: bytes, revision: int) -> bytes | None:
    """``with_resource_version`` of bytes read from the store, when they are in the stored
    form: the first object nested in them is the top-level metadata (only strings, such
    as apiVersion and kind, before it), and no resourceVersion anywhere (a reference's,
    such as an Event's involvedObject, is not told from the object's own without a
    parse). None otherwise: the caller parses and serialises."""
    at = stored.find(_META_KEY)
    if at < 0 or stored.find(b"{", 1) != at + len(_META_KEY) - 1 or b"[" in stored[:at]:
        return None
    if b'"resourceVersion"' in stored:
        return None
    return with_resource_version(stored, revision)


def without_resource_version(served: bytes, revision: int) -> bytes:
    """The inverse of ``with_resource_version``: the stored JSON of a served object (parsed
    and serialised again where the bytes are not as that function leaves them)."""
    at = served.find(_META_KEY)
    if at >= 0:
        at += len(_META_KEY)
        rv = b'"resourceVersion":"%d"' % revision
        if served.startswith(rv, at):
            end = at + len(rv)
            if served[end:end + 1] == b",":
                end += 1
            return served[:at] + served[end:]
    obj = orjson.loads(served)
    obj["metadata"].pop("resourceVersion", None)
    return orjson.dumps(obj)
