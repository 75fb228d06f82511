"""Splice plans: a repeated write made as a few splices into the bytes this process wrote last.

A kubelet's heartbeats rewrite the same object again and again with only times moved:
a Lease's ``spec.renewTime``, a Node's conditions' ``lastHeartbeatTime``, and the
writer's managedFields entry's ``time``. Made the whole way, each is a parse, a
managedFields comparison and a serialisation of the object. ``SplicePlans`` keeps, per
object, the version this process last wrote (its bytes and revision) and where each
moving value sits in them; the next such write is that version with the new values
spliced in, written expecting that revision.

A plan is learnt from a write made the whole way whose only changes were those values
(the caller knows: ``learn`` is told), where each value is found exactly as often as the
write set it (a value found more often, say an annotation holding the same time, would
be ambiguous: nothing is learnt). The revision names the bytes: if anyone wrote the
object since (another writer, another API server over the same store), the store answers
a conflict, the caller ``forget``s the plan and makes the write the whole way from the
version the conflict names. A plan is used only for the same writer (field manager) and
the same ``tag`` (what else the write carries: a Node report's conditions), and only
where the bytes around every value are still those of the member it was found in.
"""

from __future__ import annotations

from ..registry.attrs import Attrs

__all__ = ["PLANS_MAX", "SplicePlans"]

PLANS_MAX = 1_000_000  # objects remembered; past it the plans start over


class SplicePlans:
    """``fields``: for each moving value, the JSON member's opening it follows (``b'"time":"'``)
    and its fixed width in the stored form (a time's ``2026-12-02T01:00:00Z`` is 20)."""

    def __init__(self, fields: tuple[tuple[bytes, int], ...]) -> None:
        self.fields = fields
        # key -> (revision, manager, tag, stored bytes, ((offset, value index), ...) by offset, attrs)
        self._plans: dict[bytes, tuple[int, str, bytes, bytes, tuple[tuple[int, int], ...], Attrs]] = {}

    def __len__(self) -> int:
        return len(self._plans)

    def learn(self, key: bytes, revision: int, manager: str, stored: bytes, values: tuple[bytes, ...],
              counts: tuple[int, ...], attrs: Attrs, tag: bytes = b"") -> None:
        """``stored`` (written at ``revision``, with ``attrs``) is a write made the whole way by
        ``manager`` that changed only the moving values, to ``values``, each in ``counts``
        places: remember where they sit, when each is found exactly that often."""
        spans: list[tuple[int, int]] = []
        for i, ((field, width), value, count) in enumerate(zip(self.fields, values, counts, strict=True)):
            needle = field + value + b'"'
            found, at = 0, stored.find(needle)
            while at >= 0 and len(value) == width:
                spans.append((at + len(field), i))
                found += 1
                at = stored.find(needle, at + 1)
            if found != count:
                self._plans.pop(key, None)
                return
        if len(self._plans) >= PLANS_MAX:
            self._plans.clear()
        self._plans[key] = (revision, manager, tag, stored, tuple(sorted(spans)), attrs)

    def learn_marked(self, key: bytes, revision: int, manager: str, stored: bytes, marked: bytes,
                     marks: tuple[bytes, ...], values: tuple[bytes, ...], counts: tuple[int, ...], attrs: Attrs,
                     tag: bytes = b"") -> None:
        """As ``learn``, where searching ``stored`` for the values could be ambiguous (two
        managedFields entries re-timed in the same second): ``marked`` is the same object
        serialised with each moving value set to its mark (of the value's width, found
        nowhere else), so the marks say where the values sit. Nothing is learnt unless each
        mark is found ``counts`` times and ``marked`` with the values put back is exactly
        ``stored``."""
        spans: list[tuple[int, int]] = []
        for i, ((field, width), mark) in enumerate(zip(self.fields, marks, strict=True)):
            at = marked.find(mark)
            while at >= 0 and len(mark) == width:
                if marked[at - len(field):at] == field:
                    spans.append((at, i))
                at = marked.find(mark, at + 1)
        spans.sort()
        parts: list[bytes] = []
        done = 0
        found = [0] * len(counts)
        for at, i in spans:
            found[i] += 1
            parts.append(marked[done:at])
            parts.append(values[i])
            done = at + self.fields[i][1]
        parts.append(marked[done:])
        if tuple(found) != counts or b"".join(parts) != stored:
            self._plans.pop(key, None)
            return
        if len(self._plans) >= PLANS_MAX:
            self._plans.clear()
        self._plans[key] = (revision, manager, tag, stored, tuple(spans), attrs)

    def splice(self, key: bytes, manager: str, values: tuple[bytes, ...], tag: bytes = b"",
               fresh: int = -1) -> tuple[bytes, int, Attrs] | None:
        """The object's last version written here with ``values`` spliced in: its bytes, the
        revision to expect and its attrs. None without a plan for this manager and tag, where
        a value is not of its width or the bytes around one disagree, or where value
        ``fresh`` is already the plan's (a write that would change nothing: the whole way
        then checks the current version, which may be another's)."""
        plan = self._plans.get(key)
        if plan is None or plan[1] != manager or plan[2] != tag:
            return None
        fields = self.fields
        for (_, width), value in zip(fields, values, strict=True):
            if len(value) != width:
                return None
        stored, spans = plan[3], plan[4]
        parts: list[bytes] = []
        done = 0
        for at, i in spans:
            field, width = fields[i]
            if stored[at - len(field):at] != field or stored[at + width:at + width + 1] != b'"':
                return None
            if i == fresh and stored[at:at + width] == values[i]:
                return None
            parts.append(stored[done:at])
            parts.append(values[i])
            done = at + width
        parts.append(stored[done:])
        return b"".join(parts), plan[0], plan[5]

    def written(self, key: bytes, base: int, revision: int, stored: bytes) -> None:
        """A write spliced from the plan at ``base`` was stored at ``revision`` as ``stored``."""
        plan = self._plans.get(key)
        if plan is not None and plan[0] == base:
            self._plans[key] = (revision, plan[1], plan[2], stored, plan[4], plan[5])

    def forget(self, key: bytes) -> None:
        """The object changed under the plan (a conflict): the whole way next."""
        self._plans.pop(key, None)
