"""RFC 7386 JSON merge patch, for the API's `application/merge-patch+json` and for the
client, which applies a merge patch itself where it must send an update instead."""

from __future__ import annotations

from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` merged in (RFC 7386). ``target`` is not changed: the maps
    along the patch's keys are new, and the result shares the rest with ``target``."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = merge_patch(merged.get(k), v)
    return merged
