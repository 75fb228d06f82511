"""RFC 6902 JSON patches as kube-apiserver applies them: with a bound on what ``copy``
operations may add.

A ``copy`` of a subtree into itself doubles the document, so a few dozen operations in a
small body ask for terabytes. Upstream's json-patch library counts the bytes each copy
adds (the copied value, marshalled) against ``AccumulatedCopySizeLimit``, which
kube-apiserver sets from its ``JSONPatchMaxCopyBytes`` (3 MiB, twice etcd's request
limit) for every patch it applies: a client's and a mutating webhook's alike::

    apply({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}])   # {'a': {'b': 1}, 'c': {'b': 1}}
    apply(doc, [{"op": "copy", "from": "", "path": "/x"}] * 40)             # CopyLimitExceeded

Everything else is the ``jsonpatch`` package's, whose exceptions the callers map to
their answers.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer
import orjson

__all__ = ["MAX_COPY_BYTES", "CopyLimitExceeded", "apply"]

MAX_COPY_BYTES = 3 * 1024 * 1024  # upstream's JSONPatchMaxCopyBytes

_ABSENT = object()


class CopyLimitExceeded(jsonpatch.JsonPatchException):
    """The ``copy`` operations of a patch added more than ``MAX_COPY_BYTES``."""


def apply(document: Any, operations: list[Any]) -> Any:
    """``document`` patched by ``operations`` (a decoded list of operation objects), in a
    copy; raises ``jsonpatch``'s and ``jsonpointer``'s exceptions, and ``CopyLimitExceeded``
    in upstream's words before a copy would take the sum of copied bytes past the limit."""
    if not any(isinstance(op, dict) and op.get("op") == "copy" for op in operations):
        return jsonpatch.apply_patch(document, operations, in_place=False)
    patched = copy.deepcopy(document)
    copied = 0
    for op in operations:
        if isinstance(op, dict) and op.get("op") == "copy" and isinstance(op.get("from"), str):
            source = jsonpointer.resolve_pointer(patched, op["from"], _ABSENT)
            if source is not _ABSENT:  # (an absent one fails in the library, in its words)
                copied += len(orjson.dumps(source))
                if copied > MAX_COPY_BYTES:
                    raise CopyLimitExceeded(f"Unable to complete the copy, the accumulated size increase of copy "
                                            f"is {copied}, exceeding the limit {MAX_COPY_BYTES}")
        patched = jsonpatch.apply_patch(patched, [op], in_place=True)
    return patched
