"""What list and watch filter on: an object's labels and selectable fields
(kube-apiserver's ``GetAttrs``), extracted once per object version, and the
filter a request's selectors make of them.

    >>> f = Filter.parse("pods", "app=web", "spec.nodeName=node-1", namespace="team-a")
    >>> f.matches(Attrs.of("pods", {"metadata": {"namespace": "team-a", "labels": {"app": "web"}},
    ...                             "spec": {"nodeName": "node-1"}}))
    True
    >>> f.index_hint()
    ('spec.nodeName', 'node-1')

The watch cache keeps ``Attrs`` beside each object's bytes so that filtering
never parses JSON; the store-backed reads build them from the parsed object.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

from .selectors import LabelSelector, SelectorError, parse_field_selector, parse_label_selector, selectable_fields

__all__ = ["INDEXED_FIELDS", "Attrs", "Filter", "SelectorError"]

# The fields watchers are indexed by, most selective first: a kubelet watches
# its node's pods, an object's watcher names it, a namespaced client its namespace.
INDEXED_FIELDS = ("metadata.name", "spec.nodeName", "metadata.namespace")

_getters = functools.cache(selectable_fields)  # per plural, made once; never mutated


class Attrs(NamedTuple):
    """An object's labels and selectable fields, as dicts of strings only (which
    CPython's cyclic GC does not track)."""

    labels: dict[str, str] | None
    fields: dict[str, str]  # every selectable field of the type -> its value as a string

    @staticmethod
    def of(plural: str, obj: dict[str, Any]) -> Attrs:
        meta = obj.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if isinstance(labels, dict) and labels:
            labels = {str(k): str(v) for k, v in labels.items()}  # only strings: an untracked dict
        else:
            labels = None
        return Attrs(labels, {name: get(obj) for name, get in _getters(plural).items()})


@dataclass(frozen=True, slots=True)
class Filter:
    """A request's label selector, field selector terms and URL namespace, together."""

    labels: LabelSelector
    terms: tuple[tuple[str, bool, str], ...]  # (field name, equal, value)

    @staticmethod
    def parse(plural: str, label_selector: str | None, field_selector: str | None,
              namespace: str | None = None) -> Filter:
        """Raises ``SelectorError`` for a selector kube-apiserver would refuse."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, plural)
        names = {id(get): name for name, get in selectable_fields(plural).items()}
        terms = [(names[id(get)], equal, value) for get, equal, value in fields.terms]
        if namespace:
            terms.append(("metadata.namespace", True, namespace))
        return Filter(labels, tuple(terms))

    @property
    def everything(self) -> bool:
        return self.labels.empty and not self.terms

    def matches(self, attrs: Attrs) -> bool:
        fields = attrs.fields
        for name, equal, value in self.terms:
            if (fields.get(name, "") == value) != equal:
                return False
        return self.labels.matches(attrs.labels)

    def index_hint(self) -> tuple[str, str] | None:
        """The (field, value) every matching object has, on the most selective
        indexed field, or None: a watcher with a hint is woken only by objects
        whose old or new version has that value."""
        for field in INDEXED_FIELDS:
            for name, equal, value in self.terms:
                if name == field and equal:
                    return field, value
        return None
