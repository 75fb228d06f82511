"""RFC 7386 JSON merge patch, for the API's `application/merge-patch+json` and for the
client, which applies a merge patch itself where it must send an update instead.

As upstream's json-patch library (``gopkg.in/evanphx/json-patch.v4``, ``MergePatch``)
merges: a value the patch brings where the target has no object (a missing or null key,
a scalar, a list) is taken without its null fields, at any depth, in the maps inside
its lists too (a list keeps its null items); a non-object value that replaces an
object is taken as sent::

    merge_patch({"a": [1]}, {"a": [{"b": None, "c": 1}, None]})    # {'a': [{'c': 1}, None]}
    merge_patch({"a": {"x": 1}}, {"a": [{"b": None}]})             # {'a': [{'b': None}]}
"""

from __future__ import annotations

from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any, nulls: bool = True) -> Any:
    """``target`` with ``patch`` merged in (RFC 7386). ``target`` is not changed: the maps
    along the patch's keys are new, and the result shares the rest with ``target``.

    ``nulls=False`` says the patch holds no null below its maps' keys (a body without the
    bytes ``null``), so what it brings is taken as it is: pruning a kubelet's status patch
    (conditions, container statuses) cost eight times the merge itself."""
    if not isinstance(patch, dict):
        return patch if not nulls or isinstance(target, dict) else _without_nulls(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = merge_patch(merged.get(k), v, nulls)
    return merged


def _without_nulls(value: Any) -> Any:
    """``value`` without the null fields of its maps, at any depth (the library's
    ``pruneNulls``: a list's null items stay). Only maps and lists are walked into: a call
    for each scalar cost most of a kubelet's status patch (its conditions' null
    ``lastProbeTime``)."""
    t = type(value)
    if t is dict:
        return {k: _without_nulls(v) if type(v) in _WALKED else v for k, v in value.items() if v is not None}
    if t is list:
        return [_without_nulls(v) if type(v) in _WALKED else v for v in value]
    return value


_WALKED = (dict, list)  # (what JSON decodes to: exact types, no subclasses)
