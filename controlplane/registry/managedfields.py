"""``metadata.managedFields``: who owns which fields of an object, kept on every
write, and server-side apply on top of it (KEP-555).

Every write records its manager (the ``fieldManager`` parameter, else the
user agent's product name): creates, updates and patches as an ``Update``
entry owning what the write set or changed (``record_write``); applies as an
``Apply`` entry owning exactly what the applied configuration sets (``apply``).
An entry is identified by manager, operation and subresource; we serve one
version per kind, so the API version does not split entries.

Rules kept here, as kube-apiserver keeps them:

- A write takes the fields it changes away from every other manager (an update
  always wins; an apply wins only with ``force``, else the other managers'
  changed fields are ``Conflicts``). Removed fields leave every set.
- An apply removes the fields its manager applied last time and no longer
  applies, unless another manager owns them (or something below them).
- A request that sends ``managedFields: [{}]`` or ``[]`` clears them (upstream's
  ``isResetManagedFields``; a create's are then its creator's alone). One that
  sends none keeps the stored ones, so clients unaware of the field cannot drop
  it; one that sends valid entries replaces them.
  Subresource writes always keep the stored ones.
- An object without managedFields (cleared) stays so: updates, patches and
  subresource writes track nothing on it until an apply tracks it again
  (upstream's skipNonAppliedManager; creates are always tracked).
- Server-set metadata (name, uid, resourceVersion...), ``apiVersion`` and
  ``kind`` are nobody's; nor is ``status`` when written through the object of
  a kind with a status subresource, nor anything but ``status`` and the metadata
  its status strategy lets a status write change (``statuswrites``) through it.
- At most ten ``Update`` entries: older ones merge into ``ancient-changes``.
- An apply to an object without managedFields first gives all it has to
  ``before-first-apply`` (an ``Update`` entry), as upstream.
- Writes are recorded in the form the object is stored in, as upstream records
  them on the decoded object: a Secret's ``stringData`` counts as the ``data``
  keys it becomes. An apply owns what its configuration says, ``stringData``
  included (upstream's applied set is the configuration's).
- An apply by ``kubectl`` that conflicts only on fields the object's client-side
  apply annotation (``kubectl.kubernetes.io/last-applied-configuration``) gives
  the values they still have is forced (upstream's lastAppliedManager): the first
  ``kubectl apply --server-side`` after client-side ones takes them over.
- Custom resources are walked by their CRD's schema (``shapes.custom_shape``).
- A write through ``/scale`` is an ``Update`` with subresource ``scale`` owning
  the parent's replicas field, taken from whoever owned it (``record_scale``,
  upstream's ScaleHandler); an apply through it an ``Apply`` entry with
  subresource ``scale`` (``apply_scale``).
"""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from . import fieldpath
from .fieldpath import SELF, Tree
from .shapes import Shape, custom_shape, shape_for
from .statuswrites import kept_at_status_write
from .typed import ShapeError, compare, created_set, equal, field_set, merge, remove
from .types import ResourceType

__all__ = ["APPLY", "KUBECTL", "LAST_APPLIED", "SCALE", "SCALE_TYPE", "UPDATE", "Conflict", "Conflicts", "Entry",
           "ShapeError", "apply", "apply_scale", "apply_shape", "decode", "manager_from_user_agent", "record_scale",
           "record_write", "revert_times", "value_at"]

APPLY, UPDATE = "Apply", "Update"
SCALE = "scale"
MAX_UPDATE_ENTRIES = 10
ANCIENT = "ancient-changes"
BEFORE_FIRST_APPLY = "before-first-apply"
MAX_MANAGER_LENGTH = 128
KUBECTL = "kubectl"  # the manager of ``kubectl apply --server-side``
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # client-side apply's annotation
_SERVER_META = ("name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
                "managedFields", "resourceVersion")
_SERVER_META_SET = frozenset(_SERVER_META)


@dataclass(slots=True)
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str | None
    fields: Tree
    subresource: str = ""
    stored: Tree | None = None  # ``fields`` as read from the stored object (in upstream's order), if so

    @property
    def key(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource

    def describe(self) -> str:
        """As kube-apiserver names a manager in a conflict: ``"kubectl-edit" using apps/v1``."""
        out = f'"{self.manager}"'
        if self.subresource:
            out += f' with subresource "{self.subresource}"'
        if self.operation == UPDATE:
            out += f" using {self.api_version}"
        return out

    def encode(self) -> dict[str, Any]:
        # (a manager of "", a request's without ``fieldManager`` or user agent: ``omitempty``)
        out: dict[str, Any] = {"manager": self.manager} if self.manager else {}
        out["operation"], out["apiVersion"] = self.operation, self.api_version
        if self.time is not None:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        # upstream writes each set in its sorted order (only what this write made is sorted)
        out["fieldsV1"] = fieldpath.ordered(self.fields, self.stored)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


@dataclass(frozen=True, slots=True)
class Conflict:
    manager: str   # as ``Entry.describe`` puts it
    path: str      # as ``fieldpath.path_string`` puts it: ``.spec.replicas``
    elements: tuple[str, ...] = ()  # the path as set elements: ``("f:spec", "f:replicas")``


class Conflicts(Exception):
    """An apply would change fields other managers own (and was not forced)."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        cs = self.conflicts
        if len(cs) == 1:
            return f"Apply failed with 1 conflict: conflict with {cs[0].manager}: {cs[0].path}"
        lines: list[str] = []
        for manager in sorted({c.manager for c in cs}):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {c.path}" for c in cs if c.manager == manager)
        return f"Apply failed with {len(cs)} conflicts: " + "\n".join(lines)


def manager_from_user_agent(user_agent: str) -> str:
    """The manager of a request without ``fieldManager``: the user agent up to its
    first ``/`` (``kubectl/v1.37.0 (linux/amd64) ...`` -> ``kubectl``), at most 128 characters."""
    return user_agent.split("/", 1)[0][:MAX_MANAGER_LENGTH]


_clock: tuple[int, str] = (0, "")


def _now() -> str:
    """The time of an entry, to the second (formatted once a second: creates are hot)."""
    global _clock
    second = int(time.time())
    if second != _clock[0]:
        _clock = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _clock[1]


def apply_shape(rtype: ResourceType) -> Shape:
    """The structure of ``rtype`` as apply sees it: a custom resource's from its CRD's schema."""
    custom = rtype.custom
    if custom is not None and custom.schema is not None:
        return custom_shape(custom.schema)
    return shape_for(rtype.group, rtype.version, rtype.kind)


# -- the entries on the object ---------------------------------------------------------
def decode(raw: Any, trusted: bool = False) -> list[Entry] | None:
    """The entries of a ``managedFields`` list, or None if any is malformed.

    ``trusted``: the list was written by this module (a stored object), so the
    field sets are not checked again."""
    if not isinstance(raw, list):
        return None
    out: list[Entry] = []
    for e in raw:
        if not isinstance(e, dict):
            return None
        operation, api_version, fields_type = e.get("operation"), e.get("apiVersion"), e.get("fieldsType")
        fields = e.get("fieldsV1", {})
        manager, subresource, time = e.get("manager", ""), e.get("subresource", ""), e.get("time")
        if (operation not in (APPLY, UPDATE) or not isinstance(api_version, str) or not api_version
                or fields_type != "FieldsV1" or not (trusted or fieldpath.valid(fields)) or not isinstance(manager, str)
                or not isinstance(subresource, str) or not isinstance(time, str | None)):
            return None
        out.append(Entry(manager, operation, api_version, time, fields, subresource, fields if trusted else None))
    return out


def _is_reset(raw: Any) -> bool:
    return isinstance(raw, list) and (not raw or (len(raw) == 1 and raw[0] == {}))


def _encode(entries: list[Entry]) -> list[dict[str, Any]]:
    # Apply entries first, then by time, manager, subresource (as upstream sorts them)
    if len(entries) > 1:
        entries = sorted(entries, key=lambda e: (e.operation, e.time or "", e.manager, e.subresource))
    return [e.encode() for e in entries]


def _cap(entries: list[Entry]) -> list[Entry]:
    if len(entries) <= MAX_UPDATE_ENTRIES:
        return entries  # no more Update entries than entries: none to merge
    updates = sorted((e for e in entries if e.operation == UPDATE), key=lambda e: e.time or "")
    excess = len(updates) - MAX_UPDATE_ENTRIES
    if excess <= 0:
        return entries
    oldest = updates[:excess + 1]
    fields: Tree = {}
    for e in oldest:
        fields = fieldpath.union(fields, e.fields)
    merged_away = {id(e) for e in oldest}
    bucket = Entry(ANCIENT, UPDATE, oldest[-1].api_version, oldest[-1].time, fields)
    return [e for e in entries if id(e) not in merged_away] + [bucket]


def _store(obj: dict[str, Any], entries: list[Entry]) -> None:
    entries = _cap([e for e in entries if e.fields])
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = _encode(entries)
    else:
        meta.pop("managedFields", None)


# -- what of an object is owned --------------------------------------------------------
def _view(obj: dict[str, Any], rtype: ResourceType, subresource: str | None,
          with_meta: bool = True) -> dict[str, Any]:
    """The part of ``obj`` a write through ``subresource`` can own (a shallow copy); not
    ``with_meta``: a status write's without the metadata (it changed none)."""
    if subresource == "status":
        view = {"status": obj["status"]} if "status" in obj else {}
        return _status_meta_view(view, obj, rtype) if with_meta else view
    if subresource == "approval":  # a CSR's: its conditions alone (upstream's reset fields)
        conditions = (obj.get("status") or {}).get("conditions")
        view = {"status": {"conditions": conditions}} if conditions is not None else {}
        return _status_meta_view(view, obj, rtype) if with_meta else view
    view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if "status" in rtype.subresources:
        view.pop("status", None)
    meta = view.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in _SERVER_META}
        if meta:
            view["metadata"] = meta
        else:
            del view["metadata"]
    return view


def _meta_moved(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether ``new``'s metadata differs from ``old``'s but for the server's fields: by
    identity first, as a status patch shares what it leaves alone (the hot path, a kubelet's
    status patch, compares no metadata then)."""
    a, b = old.get("metadata"), new.get("metadata")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a != b
    for k, v in b.items():
        if k not in _SERVER_META_SET and (k not in a or (a[k] is not v and a[k] != v)):
            return True
    return not (a.keys() - b.keys()) <= _SERVER_META_SET  # (a field the write removed)


def _status_meta_view(view: dict[str, Any], obj: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
    """``view`` with the metadata a write through ``/status`` may change (``statuswrites``):
    upstream's field manager owns what the write changes but the status strategy's reset
    fields, labels and annotations included for most types."""
    kept = kept_at_status_write(rtype)
    meta = obj.get("metadata")
    if kept is None or not isinstance(meta, dict):
        return view
    meta = {k: v for k, v in meta.items() if k not in _SERVER_META and k not in kept}
    if meta:
        view["metadata"] = meta
    return view


def _stored_form(rtype: ResourceType, view: dict[str, Any]) -> dict[str, Any]:
    """``view`` as it will be stored: a Secret's ``stringData`` folded into ``data``
    (base64, stringData winning), as upstream's v1 conversion does before its field
    manager sees the object. Anything malformed is left for validation to refuse."""
    if rtype.kind != "Secret" or rtype.group or "stringData" not in view:
        return view
    string_data = view["stringData"]
    out = {k: v for k, v in view.items() if k != "stringData"}
    data = out.get("data")
    if isinstance(string_data, dict) and isinstance(data, dict | None):
        merged = dict(data or {})
        for k, v in string_data.items():
            merged[k] = base64.b64encode(str(v).encode()).decode()
        if merged:
            out["data"] = merged
    return out


def _as_stored(sent: Any, old: dict[str, Any] | None) -> bool:
    """Whether the client sent ``old``'s managedFields back as they are (it writes back what
    it read). Those entries are the stored ones, which this module wrote, so they need no
    check: were one malformed, the checked decode would fail and the stored ones, the very
    same, would be taken unchecked instead."""
    meta = old.get("metadata") if old else None
    return isinstance(meta, dict) and meta.get("managedFields", []) == sent


def record_write(rtype: ResourceType, old: dict[str, Any] | None, new: dict[str, Any], manager: str,
                 subresource: str | None = None) -> None:
    """Set ``new``'s managedFields after a create (``old`` None), update or patch by ``manager``.

    ``new`` carries what the client sent for managedFields (see the module rules)."""
    meta = new.setdefault("metadata", {})
    sent = meta.pop("managedFields", None)
    if subresource is None and _is_reset(sent):
        if old is not None:
            return
        sent = None  # a create is tracked all the same, from nothing
    if subresource is None and sent and old is not None and _as_stored(sent, old):
        sent = old["metadata"]["managedFields"]  # (the same, in the order written: == ignores it)
        entries = decode(sent, trusted=True)
    else:
        entries = decode(sent) if subresource is None and sent else None
    if entries is None:
        entries = (decode(old.get("metadata", {}).get("managedFields", []), trusted=True) if old else None) or []
    if old is not None and not entries:
        return  # nobody's fields are tracked: an update does not start (upstream's skipNonAppliedManager)
    shape = apply_shape(rtype)
    with_meta = subresource not in ("status", "approval") or old is None or _meta_moved(old, new)
    try:
        new_view = _stored_form(rtype, _view(new, rtype, subresource, with_meta))
        if old is None:
            changed, removed = created_set(new_view, shape), {}
        else:
            diff = compare(_stored_form(rtype, _view(old, rtype, subresource, with_meta)), new_view, shape)
            changed, removed = fieldpath.union(diff.added, diff.modified), diff.removed
    except (ShapeError, RecursionError):
        return  # as upstream: an object the walk cannot follow gets no managedFields
    if not changed and not removed:
        _store(new, entries)
        return
    _give(entries, rtype, manager, subresource or "", changed, removed)
    _store(new, entries)


def revert_times(new: dict[str, Any], old: dict[str, Any],
                 same: Callable[[dict[str, Any], dict[str, Any]], bool]) -> bool:
    """Whether ``new`` (to be stored) is ``old`` (``same``), once ``new`` is given ``old``'s
    managedFields where they differ only in entries' times, in place: upstream's
    IgnoreManagedFieldsTimestampsTransformer, run on every update after the strategy. The field
    manager records a write's time when it sees a change, but it sees the object before what the
    strategy and the stored form do to it (defaults, a quantity's canonical form, an atomic list
    applied without its items' defaults): a write left byte-identical but for a time is no write.
    An entry added or dropped, or one owning other fields, is a change all the same.

    ``same`` is called exactly once, so the caller's no-op test is this answer, not a second
    comparison of the two objects::

        if managedfields.revert_times(obj, old, equal):
            ...  # no write
    """
    meta = new.get("metadata")
    old_meta = old.get("metadata")
    if type(meta) is not dict or type(old_meta) is not dict:
        return same(new, old)
    fields, old_fields = meta.get("managedFields"), old_meta.get("managedFields")
    if (type(fields) is not list or type(old_fields) is not list or not fields or len(fields) != len(old_fields)
            or fields == old_fields):
        return same(new, old)
    for a, b in zip(fields, old_fields, strict=True):
        if type(a) is not dict or type(b) is not dict:
            return same(new, old)
        if a != b and {k: v for k, v in a.items() if k != "time"} != {k: v for k, v in b.items() if k != "time"}:
            return same(new, old)
    meta["managedFields"] = old_fields
    if same(new, old):
        return True
    # the objects differ elsewhere: the new times stand, and (its managedFields differing
    # from old's too) ``new`` is no more ``old`` than it was with old's
    meta["managedFields"] = fields
    return False


def _give(entries: list[Entry], rtype: ResourceType, manager: str, sub: str, changed: Tree, removed: Tree) -> None:
    """``changed`` taken from every entry and given to ``manager``'s ``Update`` entry (made if
    missing) for subresource ``sub``; ``removed`` taken from every entry."""
    own: Entry | None = None
    for e in entries:
        e.fields = fieldpath.difference(fieldpath.difference(e.fields, removed), changed)
        if e.key == (manager, UPDATE, sub):
            own = e
    if changed:
        if own is None:
            own = Entry(manager, UPDATE, rtype.api_version, None, {}, sub)
            entries.append(own)
        own.fields = fieldpath.union(own.fields, changed)
        own.time, own.api_version = _now(), rtype.api_version


def _leaf(path: tuple[str, ...]) -> Tree:
    """The set of one field: ``("spec", "replicas")`` -> ``{"f:spec": {"f:replicas": {}}}``."""
    tree: Tree = {}
    for part in reversed(path):
        tree = {f"f:{part}": tree}
    return tree


def value_at(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` of nested objects, None where a step is missing or not an object."""
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def record_scale(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any], manager: str,
                 replicas: tuple[str, ...] = ("spec", "replicas")) -> None:
    """Set ``new``'s managedFields after ``manager`` wrote ``old``'s replicas (at the path
    ``replicas``) through ``/scale``. As upstream's ScaleHandler: the Scale's own update
    owns ``spec.replicas`` when it changes it, which on the parent is the replicas field,
    owned by an ``Update`` entry with subresource ``scale`` and taken from every other
    entry. A write that leaves the replicas as they were changes no ownership."""
    stored = (old.get("metadata") or {}).get("managedFields", [])
    meta = new.setdefault("metadata", {})
    if not stored:  # an object nobody's fields are tracked of stays so (upstream's skipNonAppliedManager)
        meta.pop("managedFields", None)
        return
    if value_at(old, replicas) == value_at(new, replicas):
        if stored:
            meta["managedFields"] = stored
        else:
            meta.pop("managedFields", None)
        return
    entries = decode(stored, trusted=True) or []
    _give(entries, rtype, manager, SCALE, _leaf(replicas), {})
    _store(new, entries)


# A Scale (autoscaling/v1) as apply walks it through ``/scale``
SCALE_TYPE = ResourceType("autoscaling", "v1", "Scale", "scales", True)


def apply_scale(rtype: ResourceType, parent: dict[str, Any], scale: dict[str, Any], config: dict[str, Any],
                manager: str, force: bool, replicas: tuple[str, ...] = ("spec", "replicas")) -> dict[str, Any]:
    """The Scale after ``manager`` applies ``config`` (an autoscaling/v1 Scale) through
    ``/scale`` to ``scale``, the Scale view of ``parent``; ``parent``'s managedFields are set
    (in place) to what the apply owns, as upstream's ScaleHandler converts them:

    - to the Scale: every entry owning the parent's replicas field (at ``replicas``) owns
      the Scale's ``spec.replicas``, under its own manager, operation and subresource (so a
      conflict names it as the parent's entry does); the others are not seen;
    - the apply is one on the Scale, entry ``Apply`` with subresource ``scale``: it
      conflicts with those owners unless ``force``, and an object nobody owns the replicas
      of gets a ``before-first-apply`` entry first;
    - back to the parent: an entry that lost the Scale's replicas loses the parent's; one
      the apply made (the applier's, or ``before-first-apply``) that owns them owns the
      parent's replicas field, in the parent's version and with no ``time`` (upstream takes
      the times from the parent's entries); the rest are kept as they were.

    The result has no ``spec.replicas`` if the apply removed them (Go reads 0). Raises
    ``Conflicts`` and ``ShapeError`` as ``apply`` does."""
    entries = decode((parent.get("metadata") or {}).get("managedFields", []), trusted=True) or []
    parent_path = tuple(f"f:{p}" for p in replicas)
    scale_path = ("f:spec", "f:replicas")
    owners = [Entry(e.manager, e.operation, e.api_version, e.time, _leaf(("spec", "replicas")), e.subresource)
              for e in entries if _has(e.fields, parent_path)]
    live = dict(scale)
    live["metadata"] = {k: v for k, v in (scale.get("metadata") or {}).items() if k != "managedFields"}
    if owners:
        live["metadata"]["managedFields"] = _encode(owners)
    try:
        result = _apply(SCALE_TYPE, live, config, manager, SCALE, force, None)
    except RecursionError as err:
        raise ShapeError("the object is nested too deeply") from err
    after = {e.key: e for e in decode(result["metadata"].pop("managedFields", []), trusted=True) or []}
    made = {k: e for k, e in after.items() if _has(e.fields, scale_path)}
    out: list[Entry] = []
    for e in entries:
        if _has(e.fields, parent_path):
            made.pop(e.key, None)
            if e.key not in after:
                e.fields = fieldpath.difference(e.fields, _leaf(replicas))  # taken through the Scale
        elif e.key in made:
            continue  # the Scale's entry of the same manager stands for it
        out.append(e)
    # the parent's times, as upstream takes them: an entry new to the parent has none
    out.extend(Entry(e.manager, e.operation, rtype.api_version, None, _leaf(replicas), e.subresource)
               for e in made.values())
    _store(parent, out)
    return result


# -- server-side apply -----------------------------------------------------------------
def apply(rtype: ResourceType, live: dict[str, Any] | None, config: dict[str, Any], manager: str,
          subresource: str | None = None, force: bool = False,
          defaults: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The object after ``manager`` applies ``config`` (a full object) to ``live``
    (None: the object does not exist yet), with its managedFields.

    ``defaults`` fills in, in place, the type's defaults of an existing object the
    apply changed: a field the apply removed that has a default comes back with it,
    owned by nobody (upstream defaults the object its apply made). A create is
    defaulted as every create is.

    Raises ``Conflicts`` if fields other managers own would change and not ``force``;
    ``ShapeError`` if the configuration cannot be walked (a 400)."""
    try:
        try:
            return _apply(rtype, live, config, manager, subresource, force, defaults)
        except Conflicts as e:
            if manager != KUBECTL or live is None:
                raise
            allowed = _last_applied_set(rtype, live, subresource)
            if allowed is None:
                raise
            left = [c for c in e.conflicts if not _has(allowed, c.elements)]
            if left:
                raise Conflicts(left) from None
            # what kubectl applied client-side and still is as it applied it: kubectl's now
            return _apply(rtype, live, config, manager, subresource, True, defaults)
    except RecursionError as e:
        raise ShapeError("the object is nested too deeply") from e


def _last_applied_set(rtype: ResourceType, live: dict[str, Any], subresource: str | None) -> Tree | None:
    """As upstream's lastAppliedManager, for ``kubectl apply --server-side`` after a
    client-side ``kubectl apply``: the fields of ``live``'s last-applied annotation
    that still have the values it gives them, which kubectl may take over from their
    managers without a conflict. None without a (readable) annotation of this version."""
    annotations = (live.get("metadata") or {}).get("annotations")
    raw = annotations.get(LAST_APPLIED) if isinstance(annotations, dict) else None
    if not raw or not isinstance(raw, str):
        return None
    try:
        last = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != rtype.api_version:
        return None
    shape = apply_shape(rtype)
    try:
        last_view = _view(last, rtype, subresource)
        fields = field_set(last_view, shape)
        diff = compare(last_view, _view(live, rtype, subresource), shape)
    except ShapeError:
        return None
    for changed in diff:
        fields = fieldpath.difference(fields, changed)
    return fields


def _has(tree: Tree, path: tuple[str, ...]) -> bool:
    """Whether ``path`` is a member of the set ``tree``."""
    node: Tree | None = tree
    for element in path:
        node = node.get(element) if node is not None else None
    return node is not None and bool(path) and fieldpath.is_member(node)


def _apply(rtype: ResourceType, live: dict[str, Any] | None, config: dict[str, Any], manager: str,
           subresource: str | None, force: bool,
           defaults: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    shape = apply_shape(rtype)
    base = live or {}
    entries = decode(base.get("metadata", {}).get("managedFields", []), trusted=True) or []
    sub = subresource or ""
    if live is not None and not entries:
        # an object nobody owns (its managedFields were cleared): what it has is
        # someone's, so that the first apply conflicts instead of silently taking it
        entries = [Entry(BEFORE_FIRST_APPLY, UPDATE, rtype.api_version, _now(),
                         created_set(_view(live, rtype, subresource), shape), sub)]
    config_view = _view(config, rtype, subresource)
    applied = field_set(config_view, shape)
    merged = merge(base, _applicable(config, config_view), shape)
    live_view = _view(base, rtype, subresource)
    diff = compare(live_view, _view(merged, rtype, subresource), shape)
    changed = fieldpath.union(diff.added, diff.modified)

    own: Entry | None = None
    conflicts: list[Conflict] = []
    for e in entries:
        if e.key == (manager, APPLY, sub):
            own = e
            continue
        clash = fieldpath.intersection(e.fields, changed)
        if clash:
            conflicts.extend(Conflict(e.describe(), fieldpath.path_string(p), p) for p in fieldpath.paths(clash))
            e.fields = fieldpath.difference(e.fields, clash)
        e.fields = fieldpath.difference(e.fields, diff.removed)
    if conflicts and not force:
        raise Conflicts(sorted(conflicts, key=lambda c: (c.manager, c.path)))
    last = own.fields if own is not None else {}
    if own is None:
        own = Entry(manager, APPLY, rtype.api_version, None, applied, sub)
        entries.append(own)
    previous = (own.fields, own.time)
    own.fields, own.time, own.api_version = applied, _now(), rtype.api_version

    owned: Tree = {}
    for e in entries:
        owned = fieldpath.union(owned, e.fields)
    result = remove(merged, _unowned(last, owned), shape)
    if result is not merged:
        removed = compare(live_view, _view(result, rtype, subresource), shape).removed
        for e in entries:
            if e is not own:
                e.fields = fieldpath.difference(e.fields, removed)
    if defaults is not None and live is not None and not _same_object(base, result):
        result = copy.deepcopy(result)  # it shares what the apply left alone with live and config
        defaults(result)
    if previous[0] == applied and _same_object(base, result):
        own.time = previous[1]  # a no-op apply changes nothing, its time included
    result = dict(result)
    result["metadata"] = dict(result.get("metadata") or {})
    _store(result, entries)
    return result


def _applicable(config: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    """What of ``config`` is merged into the object: what its manager may own, and
    the identity (apiVersion, kind, name, namespace) that must match anyway."""
    out = dict(view)
    for k in ("apiVersion", "kind"):
        if k in config:
            out[k] = config[k]
    meta = config.get("metadata")
    if isinstance(meta, dict):
        ident = {k: meta[k] for k in ("name", "namespace") if k in meta}
        out["metadata"] = {**out.get("metadata", {}), **ident}
    return out


def _unowned(last: Tree, owned: Tree) -> Tree:
    """The members of ``last`` that nobody owns now, nor anything below them."""
    out: Tree = {}
    for element, node in last.items():
        if element == SELF:
            continue
        other = owned.get(element)
        if other is None:
            out[element] = node
            continue
        below = _unowned(node, other)
        if below:
            out[element] = below
    return out


def _same_object(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def bare(o: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k not in ("managedFields", "resourceVersion")}
        return {**o, "metadata": meta}
    return equal(bare(a), bare(b))
