"""What list and watch filter on: an object's labels and selectable fields
(kube-apiserver's ``GetAttrs``), extracted once per object version, and the
filter a request's selectors make of them.

    >>> f = Filter.parse("pods", "app=web", "spec.nodeName=node-1", namespace="team-a")
    >>> f.matches(attrs_of("pods", {"metadata": {"namespace": "team-a", "labels": {"app": "web"}},
    ...                            "spec": {"nodeName": "node-1"}}))
    True
    >>> f.index_hint()
    ('spec.nodeName', 'node-1')

``Attrs`` are plain tuples of strings: ``(labels, fields)`` with ``labels`` the
``(key, value)`` pairs (or None) and ``fields`` the values of the type's
selectable fields, in ``field_names(plural)`` order. Tuples of strings are
objects CPython's cyclic GC stops tracking after one pass, so the watch cache
can keep them beside each object's bytes (filtering never parses JSON) without
its million entries being walked by every collection.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from ..gcsettings import untracked
from .selectors import LabelSelector, SelectorError, parse_field_selector, parse_label_selector, selectable_fields

__all__ = ["INDEXED_FIELDS", "Attrs", "Filter", "SelectorError", "attrs_of", "field_names"]

# The fields watchers are indexed by, most selective first: a kubelet watches
# its node's pods, an object's watcher names it, a namespaced client its namespace.
INDEXED_FIELDS = ("metadata.name", "spec.nodeName", "metadata.namespace")

Attrs = tuple[tuple[tuple[str, str], ...] | None, tuple[str, ...]]


@functools.cache
def _getters(plural: str) -> tuple[Callable[[dict[str, Any]], str], ...]:
    return tuple(selectable_fields(plural).values())


@functools.cache
def field_names(plural: str) -> tuple[str, ...]:
    """The selectable fields of ``plural``, in the order ``Attrs`` holds their values."""
    return tuple(selectable_fields(plural))


# Fields whose values are (nearly) unique per object: interning them would only
# grow the interpreter's table. Every other value repeats across objects (a
# namespace, a node name, a phase) and is held once (``sys.intern``).
_UNIQUE_FIELDS = frozenset({"metadata.name", "status.podIP", "status.podIPs"})


@functools.cache
def _extractors(plural: str) -> tuple[tuple[Callable[[dict[str, Any]], str], bool], ...]:
    """Each selectable field's getter, in ``field_names`` order, and whether its value is shared (interned)."""
    return tuple((get, name not in _UNIQUE_FIELDS) for name, get in zip(field_names(plural), _getters(plural),
                                                                         strict=True))


# Objects of one template carry the same labels: one tuple serves them all. Bounded,
# so unique label sets cannot grow it; a miss only costs the tuple it would have saved.
_LABEL_SETS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
_LABEL_SETS_MAX = 65_536


def attrs_of(plural: str, obj: dict[str, Any]) -> Attrs:
    """The object's labels and field values, with repeated strings and label sets
    shared: a million pods' attrs take about 300 bytes each instead of 1,200."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    intern = sys.intern
    pairs = None
    if isinstance(labels, dict) and labels:
        # tuple(list), not tuple(generator): a generator's tuple is resized, which
        # re-registers it with the GC after the tuples that hold it, and the GC
        # can untrack a tuple only after everything in it (it walks in that order)
        pairs = tuple([(intern(str(k)), intern(str(v))) for k, v in labels.items()])
        shared = _LABEL_SETS.get(pairs)
        if shared is not None:
            pairs = shared
        else:
            untracked(pairs)  # (its pairs the next young collection untracks: they hold strings)
            if len(_LABEL_SETS) < _LABEL_SETS_MAX:
                _LABEL_SETS[pairs] = pairs
    values = []
    for get, share in _extractors(plural):
        value = get(obj)
        values.append(intern(value) if share and type(value) is str else value)
    # untracked now: the collector would leave many of these tracked (gcsettings.untracked)
    return untracked((pairs, untracked(tuple(values))))


@dataclass(frozen=True, slots=True)
class Filter:
    """A request's label selector, field selector terms and URL namespace, together."""

    labels: LabelSelector
    terms: tuple[tuple[str, bool, str], ...]  # (field name, equal, value)
    positions: tuple[int, ...] = ()           # each term's field's index in ``Attrs`` fields
    # when every label requirement is ``key=value`` (or ``key in (value)``): those pairs,
    # looked up in an object's label pairs as they are, without making them a dict
    label_pairs: tuple[tuple[str, str], ...] | None = None
    # whether the request itself gave a label or field selector (not the URL's namespace, which
    # ``terms`` holds as well): upstream's predicate then is not ``Empty()``, even when the field
    # selector says the URL's namespace again, and a page carries no ``remainingItemCount``
    selective: bool = field(default=False, compare=False)
    # derived once (``matches`` runs for every event and every watcher): each term as
    # (position, value, equal), whether there is no label requirement, and ``everything``
    _checks: tuple[tuple[int, str, bool], ...] = field(init=False, repr=False, compare=False)
    _no_labels: bool = field(init=False, repr=False, compare=False)
    _everything: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks = tuple((pos, value, equal) for (_, equal, value), pos in zip(self.terms, self.positions, strict=True))
        object.__setattr__(self, "_checks", checks)
        object.__setattr__(self, "_no_labels", self.labels.empty)
        object.__setattr__(self, "_everything", self.labels.empty and not self.terms)

    @staticmethod
    def parse(plural: str, label_selector: str | None, field_selector: str | None,
              namespace: str | None = None, name: str | None = None, custom: bool = False,
              only: Collection[str] | None = None) -> Filter:
        """Raises ``SelectorError`` for a selector kube-apiserver would refuse. ``name``: the
        object a legacy watch path names, selected by its name as upstream's listOpts does, so
        the field selector, if any, must select that name too; ``custom``: ``plural`` is a
        custom resource's (its ``custom_fields_key``), ``only`` the selectable fields of the
        version asked for (``parse_field_selector``)."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, plural, custom, only)
        names = {id(get): field for field, get in selectable_fields(plural).items()}
        terms = [(names[id(get)], equal, value) for get, equal, value in fields.terms]
        if name is not None:
            if not terms:
                terms.append(("metadata.name", True, name))
            elif ("metadata.name", True, name) not in terms:
                raise SelectorError("fieldSelector metadata.name doesn't match requested name")
        if namespace:
            terms.append(("metadata.namespace", True, namespace))
        order = field_names(plural)
        pairs = tuple((r.key, next(iter(r.values))) for r in labels.requirements
                      if r.op in ("=", "in") and len(r.values) == 1)
        return Filter(labels, tuple(terms), tuple(order.index(name) for name, _, _ in terms),
                      pairs if pairs and len(pairs) == len(labels.requirements) else None,
                      selective=bool(fields.terms) or not labels.empty)

    @property
    def everything(self) -> bool:
        return self._everything

    def matches(self, attrs: Attrs) -> bool:
        labels, fields = attrs
        for pos, value, equal in self._checks:
            if (fields[pos] == value) != equal:
                return False
        if self._no_labels:
            return True
        pairs = self.label_pairs
        if pairs is not None:
            if not labels:
                return False
            for pair in pairs:  # noqa: SIM110 (all() over a generator: 550 ns an entry, this loop 200)
                if pair not in labels:
                    return False
            return True
        return self.labels.matches(dict(labels) if labels else None)

    def position_of(self, term: tuple[str, str]) -> int:
        """Where in ``Attrs`` fields the (field, value) equality ``term`` of this filter looks."""
        for (name, equal, value), pos in zip(self.terms, self.positions, strict=True):
            if equal and (name, value) == term:
                return pos
        raise KeyError(term)

    def index_hint(self) -> tuple[str, str] | None:
        """The (field, value) every matching object has, on the most selective
        indexed field, or None: a watcher with a hint is woken only by objects
        whose old or new version has that value."""
        for indexed in INDEXED_FIELDS:
            for name, equal, value in self.terms:
                if name == indexed and equal:
                    return indexed, value
        return None
