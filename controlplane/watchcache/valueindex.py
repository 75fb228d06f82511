"""A cache's current keys by one field's value: a kubelet's LIST of its node's pods.

A LIST with ``fieldSelector=spec.nodeName=node-7`` over a cache of every pod in
the cluster tests each entry's attrs, so each kubelet's (re)list costs the whole
cluster's pods: 500 kubelets starting while 50,000 pods churned spent about 10 %
of the API server in those walks (``million --scale 0.05``). Upstream's watch
cache indexes pods by ``spec.nodeName`` for the same reason.

``ValueIndex`` holds, for each non-empty value of one attrs position, the keys
of the entries that have it now. Invariant (kept under the cache's write lock,
with the map): the index is exactly the map's entries grouped by that value, so
keys read from it in the same critical section as a snapshot is taken are that
snapshot's entries with the value. Entries with an empty value (unbound pods)
are not held: a selector on ``""`` walks.
"""

from __future__ import annotations

from collections.abc import Iterable

from .entry import ATTRS, CacheEvent, Entry

__all__ = ["LIST_MAX", "ValueIndex"]

LIST_MAX = 256  # keys of one value held in a list; more, in a dict


class ValueIndex:
    __slots__ = ("_keys", "at")

    def __init__(self, at: int) -> None:
        self.at = at  # the position in an entry's attrs fields
        # value -> its keys, unordered: a list (8 bytes a key; a set's ~70) while short, as a
        # node's hundred pods are, so a removal's scan is short; past LIST_MAX keys (a
        # KWOK-style node of 50,000 pods) a dict, so draining it is not quadratic
        self._keys: dict[str, list[bytes] | dict[bytes, None]] = {}

    def __len__(self) -> int:
        return sum(len(keys) for keys in self._keys.values())

    def load(self, entries: Iterable[tuple[bytes, Entry]]) -> None:
        """Start over from a whole state."""
        self._keys = {}
        at = self.at
        for key, entry in entries:
            value = entry[ATTRS][1][at]
            if value:
                self._add(value, key)

    def apply(self, events: Iterable[CacheEvent]) -> None:
        """Follow the map through ``events`` (in order): one comparison for an event
        that leaves the value as it was, a pod's status write."""
        at = self.at
        for ev in events:
            obj, prev = ev.obj, ev.prev
            value = obj[ATTRS][1][at]
            before = prev[ATTRS][1][at] if prev is not None else ""
            if ev.type == "DELETED":
                if before:
                    self._discard(before, obj[0])
                continue
            if value == before:
                continue
            key = obj[0]
            if before:
                self._discard(before, key)
            if value:
                self._add(value, key)

    def keys(self, value: str) -> list[bytes]:
        """The keys that have ``value`` now, in key order (a copy: the caller may await)."""
        return sorted(self._keys.get(value, ()))

    def members(self, value: str) -> list[bytes]:
        """The keys that have ``value`` now, in no order (a copy; for a synchronous walk that
        needs no order: the Node authorizer's, api/nodeauthz.py)."""
        return list(self._keys.get(value, ()))

    def _add(self, value: str, key: bytes) -> None:
        keys = self._keys.get(value)
        if keys is None:
            self._keys[value] = [key]
        elif isinstance(keys, dict):
            keys[key] = None
        elif len(keys) < LIST_MAX:
            keys.append(key)
        else:
            grown = dict.fromkeys(keys)
            grown[key] = None
            self._keys[value] = grown

    def _discard(self, value: str, key: bytes) -> None:
        keys = self._keys.get(value)
        if keys is None:
            return
        if isinstance(keys, dict):
            keys.pop(key, None)
        elif key in keys:
            keys.remove(key)
        if not keys:
            del self._keys[value]
