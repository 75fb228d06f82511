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

from ..gcsettings import untracked
from ..registry.attrs import Attrs

__all__ = ["PLANS_MAX", "SplicePlans"]

PLANS_MAX = 1_000_000  # objects remembered; past it the plans start over


class SplicePlans:
    """``fields``: for each moving value, the JSON member's opening it follows (``b'"time":"'``)
    and its fixed width in the stored form (a time's ``2026-12-02T01:00:00Z`` is 20).

    A plan holds the stored bytes cut at the moving values: the fixed pieces between them,
    which no splice changes (every value keeps its width), and which value goes in each
    gap. A splice is then one join, and ``written`` only moves the revision and the
    values."""

    def __init__(self, fields: tuple[tuple[bytes, int], ...]) -> None:
        self.fields = fields
        # key -> _Plan
        self._plans: dict[bytes, _Plan] = {}

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
        self._keep(key, revision, manager, tag, stored, sorted(spans), values, attrs)

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
        self._keep(key, revision, manager, tag, stored, spans, values, attrs)

    def _keep(self, key: bytes, revision: int, manager: str, tag: bytes, stored: bytes,
              spans: list[tuple[int, int]], values: tuple[bytes, ...], attrs: Attrs) -> None:
        """The plan of ``stored``: cut at ``spans`` (offset, value index; by offset), each
        value of its field's width there (the learners checked)."""
        pieces: list[bytes] = []
        done = 0
        for at, i in spans:
            pieces.append(stored[done:at])
            done = at + self.fields[i][1]
        pieces.append(stored[done:])
        if len(self._plans) >= PLANS_MAX:
            self._plans.clear()
        self._plans[key] = _Plan(revision, manager, tag, tuple(pieces), tuple(i for _, i in spans),
                                 tuple(values), attrs)

    def splice(self, key: bytes, manager: str, values: tuple[bytes, ...], tag: bytes = b"",
               fresh: int = -1) -> tuple[bytes, int, Attrs] | None:
        """The object's last version written here with ``values`` spliced in: its bytes, the
        revision to expect and its attrs. None without a plan for this manager and tag, where
        a value is not of its width, or where value ``fresh`` is already the plan's (a write
        that would change nothing: the whole way then checks the current version, which may
        be another's)."""
        return self.splice_many([key], manager, values, tag, fresh)[0]

    def splice_many(self, keys: list[bytes], manager: str, values: tuple[bytes, ...], tag: bytes = b"",
                    fresh: int = -1) -> list[tuple[bytes, int, Attrs] | None]:
        """``splice`` of each of ``keys`` with the same values (one request's: a loop here,
        not a call per object, at 10,000 renewals a second)."""
        for (_, width), value in zip(self.fields, values, strict=True):
            if len(value) != width:
                return [None] * len(keys)
        plans, join = self._plans, b"".join
        unchanged = values[fresh] if fresh >= 0 else None
        out: list[tuple[bytes, int, Attrs] | None] = []
        for key in keys:
            plan = plans.get(key)
            if plan is None or plan.manager != manager or plan.tag != tag or (
                    unchanged is not None and plan.values[fresh] == unchanged):
                out.append(None)
                continue
            pieces, order = plan.pieces, plan.order
            if len(order) == 2:  # a Lease renewal's two values
                made = join((pieces[0], values[order[0]], pieces[1], values[order[1]], pieces[2]))
            else:
                parts = [pieces[0]]
                for n, i in enumerate(order, 1):
                    parts.append(values[i])
                    parts.append(pieces[n])
                made = join(parts)
            out.append((made, plan.revision, plan.attrs))
        return out

    def written(self, done: list[tuple[bytes, int, int]], values: tuple[bytes, ...]) -> None:
        """Writes spliced with ``values`` were stored: each ``(key, the plan's revision they
        were made from, the revision they took)``. A plan moved on since is left alone."""
        plans = self._plans
        for key, base, revision in done:
            plan = plans.get(key)
            if plan is not None and plan.revision == base:
                plan.revision, plan.values = revision, values

    def forget(self, key: bytes) -> None:
        """The object changed under the plan (a conflict): the whole way next."""
        self._plans.pop(key, None)


class _Plan:
    """One object's plan: the revision its bytes were stored at, who wrote them and with what
    tag, the fixed ``pieces`` of those bytes around the moving values (one more than the
    values), which value fills each gap (``order``), each value as last written, and the
    version's attrs."""

    __slots__ = ("attrs", "manager", "order", "pieces", "revision", "tag", "values")

    def __init__(self, revision: int, manager: str, tag: bytes, pieces: tuple[bytes, ...],
                 order: tuple[int, ...], values: tuple[bytes, ...], attrs: Attrs) -> None:
        self.revision = revision
        self.manager = manager
        self.tag = tag
        self.pieces = pieces
        self.order = order
        self.values = values
        self.attrs = attrs
        untracked(self)  # 100,000 nodes' plans out of the collector's sight: it holds bytes and tuples
