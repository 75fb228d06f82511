"""RFC 6902 JSON patches as upstream's json-patch library applies them
(``gopkg.in/evanphx/json-patch.v4``: a PATCH of ``application/json-patch+json``, a mutating
webhook's patch, a MutatingAdmissionPolicy's ``JSONPatch`` mutations), with its departures
from the RFC and its error messages.

Where it departs from the RFC (and from the ``jsonpatch`` package)::

    apply({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}])  # {'a': {'b': 1}}: adds a missing key
    apply({"l": [1, 2]}, [{"op": "remove", "path": "/l/-1"}])          # {'l': [1]}: negative indexes
    apply({"a": 1}, [{"op": "copy", "from": "/x", "path": "/b"}])      # {'a': 1, 'b': None}: copies a missing key

A ``copy`` of a subtree into itself doubles the document, so a few dozen operations in a
small body would ask for terabytes: the library counts the bytes each copy adds (the copied
value, marshalled) against ``AccumulatedCopySizeLimit``, which kube-apiserver sets from its
``JSONPatchMaxCopyBytes`` (3 MiB, twice etcd's request limit) for every patch it applies
(``CopyLimitExceeded`` past it, in its words).

A JSON null and a missing key are the same to it (a nil node). Errors are ``PatchError``
in the library's words, ``test_failed`` set for those that wrap its ``ErrTestFailed``::

    replace operation does not apply: doc is missing path: /data/x: missing value
    error in remove for path: '/l/5': Unable to access invalid index: 5: invalid index referenced
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

__all__ = ["MAX_COPY_BYTES", "CopyLimitExceeded", "DecodeError", "PatchError", "apply", "operations"]

MAX_COPY_BYTES = 3 * 1024 * 1024  # kube-apiserver's JSONPatchMaxCopyBytes
_MISSING = "missing value"  # the library's ErrMissing
_INVALID_INDEX = "invalid index referenced"  # ErrInvalidIndex
_INT64 = 1 << 63


class PatchError(Exception):
    """A patch that does not apply, in the library's words."""

    def __init__(self, message: str, test_failed: bool = False) -> None:
        super().__init__(message)
        self.test_failed = test_failed


class CopyLimitExceeded(PatchError):
    """The ``copy`` operations of a patch added more than ``MAX_COPY_BYTES`` (kube-apiserver's
    ``AccumulatedCopySizeLimit``)."""


class DecodeError(ValueError):
    """A patch that is no list of operations, in the words of Go's decoder (``DecodePatch``)."""


def _json_kind(value: Any) -> str:
    return ("object" if isinstance(value, dict) else "array" if isinstance(value, list)
            else "string" if isinstance(value, str) else "bool" if isinstance(value, bool) else "number")


def operations(patch: Any) -> list[Any]:
    """A decoded JSON patch's operations as the library's ``DecodePatch`` reads them: a list of
    objects (a null among them is an empty operation), or null for none; anything else is
    ``DecodeError``. What an operation holds is checked as it is applied."""
    if patch is None:
        return []
    if not isinstance(patch, list):
        raise DecodeError(f"json: cannot unmarshal {_json_kind(patch)} into Go value of type jsonpatch.Patch")
    for op in patch:
        if op is not None and not isinstance(op, dict):
            raise DecodeError(f"json: cannot unmarshal {_json_kind(op)} into Go value of type jsonpatch.Operation")
    return patch


def _decode_key(key: str) -> str:
    """RFC 6901's unescaping in one left-to-right pass, as Go's ``strings.Replacer``."""
    if "~" not in key:
        return key
    out, i = [], 0
    while i < len(key):
        pair = key[i:i + 2]
        if pair in ("~1", "~0"):
            out.append("/" if pair == "~1" else "~")
            i += 2
        else:
            out.append(key[i])
            i += 1
    return "".join(out)


def _atoi(key: str) -> int:
    """Go's ``strconv.Atoi``: an optional sign and ASCII digits, in int64's range."""
    digits = key[1:] if key[:1] in ("+", "-") else key
    if not digits or not (digits.isascii() and digits.isdigit()):
        raise PatchError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    value = int(key)
    if not -_INT64 <= value < _INT64:
        raise PatchError(f'strconv.Atoi: parsing "{key}": value out of range')
    return value


def _invalid_index(idx: int) -> PatchError:
    return PatchError(f"Unable to access invalid index: {idx}: {_INVALID_INDEX}")


# the containers' four operations (partialDoc and partialArray): a dict's never fail but for
# a missing key's remove; a list's take Go's integers, negative ones from the end
def _get(container: dict[str, Any] | list[Any], key: str) -> Any:
    if isinstance(container, dict):
        return container.get(key)
    idx = _atoi(key)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    if idx >= len(container):
        raise _invalid_index(idx)
    return container[idx]


def _set(container: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    idx = _atoi(key)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    container[idx] = value  # (in range: a replace gets the index first)


def _add(container: dict[str, Any] | list[Any], key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        idx = _atoi(key)
    except PatchError as e:
        raise PatchError(f"value was not a proper array index: '{key}': {e}") from None
    size = len(container) + 1
    if idx >= size:
        raise _invalid_index(idx)
    if idx < 0:
        if idx < -size:
            raise _invalid_index(idx)
        idx += size
    container.insert(idx, value)


def _remove(container: dict[str, Any] | list[Any], key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise PatchError(f"Unable to remove nonexistent key: {key}: {_MISSING}")
        del container[key]
        return
    idx = _atoi(key)
    if idx >= len(container):
        raise _invalid_index(idx)
    if idx < 0:
        if idx < -len(container):
            raise _invalid_index(idx)
        idx += len(container)
    del container[idx]


def _find(doc: Any, path: str) -> tuple[dict[str, Any] | list[Any] | None, str]:
    """The library's ``findObject``: the container the path's last token is in, and that
    token unescaped; None when a step on the way is missing, null, a scalar or not an index."""
    split = path.split("/")
    if len(split) < 2:
        return None, ""
    for part in split[1:-1]:
        try:
            doc = _get(doc, _decode_key(part))
        except PatchError:
            return None, ""
        if not isinstance(doc, (dict, list)):
            return None, ""
    return doc, _decode_key(split[-1])


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers, numbers equal by value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


_ABSENT = object()  # an operation without a "value" (a nil node, unlike a JSON null)


def _test(doc: Any, path: str, value: Any, null_is_nil: bool) -> None:
    failed = PatchError(f"testing value {path} failed: test failed", test_failed=True)
    if path == "":
        if value is _ABSENT or not _equal(doc, value):
            raise failed
        return
    container, key = _find(doc, path)
    if container is None:
        raise PatchError(f"test operation does not apply: is missing path: {path}: {_MISSING}")
    try:
        found = _get(container, key)
    except PatchError as e:
        raise PatchError(f"error in test for path: '{path}': {e}") from None
    if found is None:  # (missing or null: matched by no value, and by a decoded null)
        if value is _ABSENT or (value is None and null_is_nil):
            return
        raise failed
    if value is _ABSENT or not _equal(found, value):
        raise failed


def _from(op: dict[str, Any], verb: str) -> str:
    source = op.get("from")
    if not isinstance(source, str):
        raise PatchError(f"{verb} operation failed to decode from: operation, missing from field: {_MISSING}")
    return source


def _path(op: dict[str, Any], kind: str) -> str:
    """The operation's ``path``, or the error each operation words its absence with."""
    path = op.get("path")
    if isinstance(path, str):
        return path
    raise PatchError(f"{kind} operation failed to decode path: "
                     + ("" if kind in ("add", "remove", "copy") else "operation missing path field: ") + _MISSING)


def _apply_one(doc: Any, op: Any, copied: list[int], null_is_nil: bool) -> Any:
    if not isinstance(op, dict):  # (a null operation: Go's nil map, which has no op)
        op = {}
    kind = op.get("op") if isinstance(op.get("op"), str) else "unknown"
    value = op.get("value", _ABSENT)
    node = None if value is _ABSENT else value
    if kind not in ("add", "remove", "replace", "move", "test", "copy"):
        raise PatchError(f"Unexpected kind: {kind}")
    path = _path(op, kind) if kind not in ("move", "copy") else ""
    if kind == "add":
        container, key = _find(doc, path)
        if container is None:
            raise PatchError(f'add operation does not apply: doc is missing path: "{path}": {_MISSING}')
        try:
            _add(container, key, node)
        except PatchError as e:
            raise PatchError(f"error in add for path: '{path}': {e}") from None
    elif kind == "remove":
        container, key = _find(doc, path)
        if container is None:
            raise PatchError(f'remove operation does not apply: doc is missing path: "{path}": {_MISSING}')
        try:
            _remove(container, key)
        except PatchError as e:
            raise PatchError(f"error in remove for path: '{path}': {e}") from None
    elif kind == "replace":
        if path == "":
            if not isinstance(node, (dict, list)):
                raise PatchError("replace operation value must be object or array: %!w(<nil>)")
            return node
        container, key = _find(doc, path)
        if container is None:
            raise PatchError(f"replace operation does not apply: doc is missing path: {path}: {_MISSING}")
        try:
            _get(container, key)
        except PatchError:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: {_MISSING}") from None
        _set(container, key, node)
    elif kind == "test":
        _test(doc, path, value, null_is_nil)
    else:  # move, copy: the source first
        source = _from(op, kind)
        container, key = _find(doc, source)
        if container is None:
            raise PatchError(f"{kind} operation does not apply: doc is missing from path: "
                             + (f'"{source}"' if kind == "copy" else source) + f": {_MISSING}")
        if kind == "move":
            try:
                moved = _get(container, key)
                _remove(container, key)
            except PatchError as e:
                raise PatchError(f"error in move for path: '{key}': {e}") from None
        else:
            try:
                moved = copy.deepcopy(_get(container, key))
            except PatchError as e:
                raise PatchError(f"error in copy for from: '{source}': {e}") from None
        path = _path(op, kind)
        container, key = _find(doc, path)
        if container is None:
            raise PatchError(f"{kind} operation does not apply: doc is missing destination path: {path}: {_MISSING}")
        if kind == "copy":
            copied[0] += 0 if moved is None else len(orjson.dumps(moved))  # (a nil node copies nothing)
            if copied[0] > MAX_COPY_BYTES:
                raise CopyLimitExceeded(f"Unable to complete the copy, the accumulated size increase of copy is "
                                        f"{copied[0]}, exceeding the limit {MAX_COPY_BYTES}")
        try:
            _add(container, key, moved)
        except PatchError as e:
            raise PatchError(f"error in move for path: '{path}': {e}" if kind == "move"
                             else f"error while adding value during copy: {e}") from None
    return doc


def apply(document: Any, operations: list[Any], decoded: bool = False) -> Any:
    """``document`` patched by ``operations``, in a copy, as the library's ``Patch.Apply``;
    ``PatchError`` for the first operation that does not apply. ``decoded``: the operations
    were decoded from JSON (a client's or a webhook's patch), where a ``"value": null`` is
    the library's nil value (a ``test`` of it matches a missing key), not a marshalled null
    (a policy's ``JSONPatch``, whose null a missing key fails)."""
    doc = copy.deepcopy(document)
    copied = [0]
    for op in operations:
        doc = _apply_one(doc, op, copied, decoded)
    return doc
