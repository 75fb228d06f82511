"""Lifecycles as data: KWOK's ``Stage`` resource (``kwok.x-k8s.io/v1alpha1``).

A stage says: for objects of ``resourceRef`` that match ``selector``, after
``delay``, do ``next``, in KWOK's order (send its event, change the finalizers,
render ``statusTemplate`` into the status, delete: ``simulator.STEP_EVENT``).
The simulator evaluates a pod's (or node's) stages on every change it sees:
of the stages that match, one is drawn by weight (``StageSet.choose``, KWOK's
rule) and scheduled, replacing the pending one unless it is that one; when it
fires it runs only if it still matches the object as it is then
(``StageSet.pending``).

Supported fields (the rest of a stage is rejected by name, not ignored):

    spec.resourceRef: {apiGroup: v1, kind: Pod|Node}
    spec.selector: matchLabels, matchAnnotations,
                   matchExpressions [{key: <jq>, operator: In|NotIn|Exists|DoesNotExist, values}]
                   (or KWOK v0.7's [{jq: {key, operator, values}}])
    spec.weight: int; spec.weightFrom.expressionFrom: <jq> giving the weight for an object
                 (or KWOK v0.7's weightFrom.jq.expression; the *From fields alike)
    spec.delay: durationMilliseconds, durationFrom.expressionFrom,
                jitterDurationMilliseconds, jitterDurationFrom.expressionFrom
    spec.next: statusTemplate (calling only Go's, common Sprig and KWOK's functions: KWOK_FUNCTIONS),
               statusSubresource (status only: the CRD's default),
               finalizers {add: [{value}], remove: [{value}], empty}, delete,
               event {type, reason, message} (recorded as a core/v1 Event)
    spec.steps: KWOK v0.8's form of next (_next_of_steps)
    spec.immediateNextStage: bool

Keys are jq (``jqpath``); templates are Go templates (``gotemplate``). A
``*From`` expression may yield a timestamp (the delay runs until then, as for
``.metadata.deletionTimestamp``) or a duration (``"30s"``, ``"1m30s"``,
milliseconds as a number); one that yields nothing usable leaves the static
value. The jitter is KWOK's: the delay is a random point between the duration
and the jitter duration (the latest time); a jitter duration at or before the
duration is the delay.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .gotemplate import BUILTINS, Template, TemplateError, parse_go_int
from .jqpath import Jq, JqError

__all__ = ["KWOK_FUNCTIONS", "Delay", "Next", "Selector", "Stage", "StageError", "StageSet", "default_stages",
           "load_stages", "parse_duration", "read_stage_files", "stage_from_object"]

API_VERSION = "kwok.x-k8s.io/v1alpha1"
log = logging.getLogger(__name__)

try:  # libyaml's parser, ten times PyYAML's
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


class StageError(ValueError):
    pass


def _str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(v: Any, now: datetime) -> float | None:
    """Seconds from a ``*From`` value: a number of milliseconds, a Go duration, or a
    timestamp (seconds until it, never negative). None if it is none of those."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return max(0.0, v / 1000.0)
    s = str(v).strip()
    if not s:
        return None
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    else:
        if pos == len(s):
            return total
    try:
        when = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True, slots=True)
class _Expression:
    key: Jq
    operator: str
    values: frozenset[str]

    def matches(self, obj: Any) -> bool:
        found = [_str(v) for v in self.key.values(obj) if v is not None]
        if self.operator == "Exists":
            return bool(found)
        if self.operator == "DoesNotExist":
            return not found
        if self.operator == "In":
            return any(v in self.values for v in found)
        return not any(v in self.values for v in found)  # NotIn


@dataclass(frozen=True, slots=True)
class Selector:
    match_labels: dict[str, str] = field(default_factory=dict)
    match_annotations: dict[str, str] = field(default_factory=dict)
    expressions: tuple[_Expression, ...] = ()

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.match_labels:
            labels = meta.get("labels") or {}
            if any(labels.get(k) != v for k, v in self.match_labels.items()):
                return False
        if self.match_annotations:
            ann = meta.get("annotations") or {}
            if any(ann.get(k) != v for k, v in self.match_annotations.items()):
                return False
        return all(e.matches(obj) for e in self.expressions)


@dataclass(frozen=True, slots=True)
class Delay:
    duration_ms: int = 0
    duration_from: Jq | None = None
    jitter_ms: int | None = None
    jitter_from: Jq | None = None

    def seconds(self, obj: dict[str, Any], now: datetime, rng: random.Random) -> float:
        base = self.duration_ms / 1000.0
        if self.duration_from is not None:
            got = _first(self.duration_from.values(obj), now)
            if got is not None:
                base = got
        latest = self.jitter_ms / 1000.0 if self.jitter_ms is not None else None
        if self.jitter_from is not None:
            got = _first(self.jitter_from.values(obj), now)
            if got is not None:
                latest = got
        if latest is None:
            return base
        if latest <= base:  # KWOK's rule: the earlier time wins (a deletionTimestamp already past: now)
            return latest
        return base + rng.random() * (latest - base)


def _first(values: list[Any], now: datetime) -> float | None:
    for v in values:
        d = parse_duration(v, now)
        if d is not None:
            return d
    return None


@dataclass(frozen=True, slots=True)
class Next:
    status_template: Template | None = None
    finalizers_add: tuple[str, ...] = ()
    finalizers_remove: tuple[str, ...] = ()
    finalizers_empty: bool = False
    delete: bool = False
    event: dict[str, str] | None = None
    # the built-in stages' template in Python (``native``); same output, a tenth of the cost
    native: Callable[[dict[str, Any], dict[str, Callable[..., Any]]], dict[str, Any]] | None = None

    def render_status(self, obj: dict[str, Any], funcs: dict[str, Callable[..., Any]]) -> dict[str, Any] | None:
        """The status the template gives for ``obj`` (None: this stage sets none)."""
        if self.status_template is None:
            return None
        if self.native is not None:
            return self.native(obj, funcs)
        try:
            text = self.status_template.render(obj, funcs)
        except TemplateError as e:  # KWOK logs the stage's failure and leaves the object as it is
            raise StageError(f"the status template failed: {e}") from e
        try:
            status = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as e:
            raise StageError(f"the status template rendered invalid YAML: {e}") from e
        if status is None:
            return {}
        if not isinstance(status, dict):
            raise StageError("the status template must render a mapping")
        out: dict[str, Any] = _jsonable(status)
        return out

    def finalizers(self, current: list[str]) -> list[str] | None:
        """The finalizers after this stage, or None if it leaves them alone."""
        if not (self.finalizers_add or self.finalizers_remove or self.finalizers_empty):
            return None
        if self.finalizers_empty:
            return []
        out = [f for f in current if f not in self.finalizers_remove]
        out.extend(f for f in self.finalizers_add if f not in out)
        return out


def _jsonable(v: Any) -> Any:
    """YAML may give datetimes (an unquoted timestamp); the API wants their RFC 3339 text."""
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return v


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    kind: str
    api_group: str
    selector: Selector
    next: Next
    delay: Delay | None = None
    weight: int = 0
    weight_from: Jq | None = None
    immediate_next_stage: bool = False

    def weight_for(self, obj: dict[str, Any]) -> int | None:
        """The stage's weight for ``obj``, read as KWOK reads it: the first value of
        ``weightFrom`` if it is a number (truncated) or a string holding an integer in Go's
        syntax (``"10"``, ``"0x10"``); the static ``weight`` if it yields nothing or
        something else (null: an absent annotation); None, no weight at all, if it yields a
        string that is not an integer (``""`` included). A negative weight counts as 0."""
        w: int | None = self.weight
        if self.weight_from is not None:
            got = self.weight_from.values(obj)
            v = got[0] if got else None
            if isinstance(v, str):
                w = parse_go_int(v)
            elif isinstance(v, int | float) and not isinstance(v, bool):
                w = int(v)
        return None if w is None else max(0, w)


# KWOK's own template functions, which the simulator passes when it renders (``_template_funcs``);
# with the Go and Sprig ones of ``gotemplate.BUILTINS`` the functions a status template may call
KWOK_FUNCTIONS = frozenset({"Now", "StartTime", "Quote", "YAML", "Version", "NodeIP", "NodeName", "NodePort",
                            "NodeConditions", "NodeIPWith", "NodeIPsWith", "PodIP", "PodIPWith", "PodIPsWith",
                            # this simulator's own: what a 1.37 kubelet reports a pod was allocated
                            # (``allocated.pod_allocation``: ``resources`` and ``allocatedResources``)
                            "PodAllocation"})
_SPEC_FIELDS = {"resourceRef", "selector", "delay", "next", "steps", "weight", "weightFrom", "immediateNextStage"}
_FROM_FIELDS = {"expressionFrom", "jq"}
_NEXT_FIELDS = {"statusTemplate", "statusSubresource", "finalizers", "delete", "event"}
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def _unsupported(where: str, got: Iterable[str], allowed: set[str]) -> None:
    extra = sorted(set(got) - allowed)
    if extra:
        raise StageError(f"{where}: unsupported field(s) {', '.join(extra)}")


def _parse_stage(doc: dict[str, Any]) -> Stage:
    name = str((doc.get("metadata") or {}).get("name") or "")
    where = f"stage {name!r}"
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Stage":
        # say what it is: a kustomize directory of KWOK's mixes other objects in (a StorageClass)
        raise StageError(f"{name!r}: a {doc.get('kind')} of {doc.get('apiVersion')}, not a Stage: "
                         f"expected apiVersion {API_VERSION}, kind Stage")
    spec = doc.get("spec") or {}
    _unsupported(where, spec, _SPEC_FIELDS)
    ref = spec.get("resourceRef") or {}
    kind, group = str(ref.get("kind") or ""), str(ref.get("apiGroup") or "v1")
    if kind not in ("Pod", "Node") or group != "v1":
        raise StageError(f"{where}: resourceRef must be v1 Pod or v1 Node, not {group} {kind}")
    sel = spec.get("selector") or {}
    _unsupported(f"{where} selector", sel, {"matchLabels", "matchAnnotations", "matchExpressions"})
    try:
        expressions = []
        for e in sel.get("matchExpressions") or []:
            # KWOK v0.7's form, {jq: {key, operator, values}}, for which the older one is deprecated
            _unsupported(f"{where} selector", e, {"key", "operator", "values", "jq"})
            e = e.get("jq") or e
            _unsupported(f"{where} selector jq", e, {"key", "operator", "values"})
            op = e.get("operator")
            if op not in _OPERATORS:
                raise StageError(f"{where}: operator {op!r} is not one of {sorted(_OPERATORS)}")
            expressions.append(_Expression(Jq(str(e["key"])), op,
                                           frozenset(_str(v) for v in e.get("values") or [])))
        d = spec.get("delay")
        delay = None
        if d:
            _unsupported(f"{where} delay", d, {"durationMilliseconds", "durationFrom", "jitterDurationMilliseconds",
                                               "jitterDurationFrom"})
            delay = Delay(
                duration_ms=int(d.get("durationMilliseconds") or 0),
                duration_from=_expression_from(f"{where} delay.durationFrom", d.get("durationFrom")),
                jitter_ms=int(d["jitterDurationMilliseconds"]) if d.get("jitterDurationMilliseconds") is not None
                else None,
                jitter_from=_expression_from(f"{where} delay.jitterDurationFrom", d.get("jitterDurationFrom")),
            )
        weight_from = _expression_from(f"{where} weightFrom", spec.get("weightFrom"))
        if spec.get("steps") is not None and spec.get("next") is not None:
            raise StageError(f"{where}: both next and steps: give one")
        n = _next_of_steps(where, spec["steps"]) if spec.get("steps") is not None else spec.get("next") or {}
        _unsupported(f"{where} next", n, _NEXT_FIELDS)
        # the CRD's default (a stored Stage has it); a Pod's or Node's status has no other subresource
        if n.get("statusSubresource", "status") != "status":
            raise StageError(f"{where}: next.statusSubresource must be status for a Pod or a Node, "
                             f"not {n['statusSubresource']!r}")
        fin = n.get("finalizers") or {}
        template = Template(str(n["statusTemplate"])) if n.get("statusTemplate") else None
        unknown = sorted(template.functions - KWOK_FUNCTIONS - set(BUILTINS)) if template else []
        if unknown:
            raise StageError(f"{where}: the status template calls unsupported function(s) {', '.join(unknown)}")
        nxt = Next(
            status_template=template,
            finalizers_add=tuple(str(f["value"]) for f in fin.get("add") or []),
            finalizers_remove=tuple(str(f["value"]) for f in fin.get("remove") or []),
            finalizers_empty=bool(fin.get("empty")),
            delete=bool(n.get("delete")),
            event={str(k): str(v) for k, v in n["event"].items()} if n.get("event") else None,
        )
    except (JqError, TemplateError, KeyError, TypeError) as e:
        raise StageError(f"{where}: {e}") from e
    return Stage(name=name, kind=kind, api_group=group,
                 selector=Selector(dict(sel.get("matchLabels") or {}), dict(sel.get("matchAnnotations") or {}),
                                   tuple(expressions)),
                 next=nxt, delay=delay, weight=int(spec.get("weight") or 0), weight_from=weight_from,
                 immediate_next_stage=bool(spec.get("immediateNextStage")))


_STEP_FIELDS = {"event": "event", "finalizers": "finalizers", "delete": "delete", "patch": "statusTemplate"}


def _next_of_steps(where: str, steps: Any) -> dict[str, Any]:
    """KWOK v0.8's ``steps`` as the ``next`` they say for a Pod or a Node (KWOK deprecates
    ``next`` for them): one status patch (``subresource: status``, ``root: status``, strategic
    merge, KWOK's default for these kinds), event, finalizers change and delete at most each."""
    if not isinstance(steps, list):
        raise StageError(f"{where}: steps must be a list")
    n: dict[str, Any] = {}
    for i, step in enumerate(steps):
        _unsupported(f"{where} steps[{i}]", step, set(_STEP_FIELDS))
        for field_, value in step.items():
            if field_ == "delete" and not value:
                continue
            if _STEP_FIELDS[field_] in n:
                raise StageError(f"{where} steps: more than one {field_} (a Pod or Node stage has one of each)")
            if field_ == "patch":
                _unsupported(f"{where} steps[{i}].patch", value, {"subresource", "root", "template", "type"})
                if value.get("subresource") != "status" or value.get("root") != "status":
                    raise StageError(f"{where} steps[{i}].patch: only a status patch (subresource: status, "
                                     "root: status) is supported for a Pod or a Node")
                if value.get("type") not in (None, "strategic"):
                    raise StageError(f"{where} steps[{i}].patch: type {value['type']} is not supported "
                                     "(strategic, the default for a Pod or a Node)")
                value = value.get("template") or ""
            n[_STEP_FIELDS[field_]] = value
    return n


# the API groups of KWOK's configuration files: their other kinds are not this loader's concern
_KWOK_GROUPS = frozenset({"kwok.x-k8s.io", "config.kwok.x-k8s.io"})


def _expression_from(where: str, src: Any) -> Jq | None:
    """The jq of a ``*From`` field (``{expressionFrom: <jq>}``), None if it is absent."""
    if not src:
        return None
    _unsupported(where, src, _FROM_FIELDS)
    if src.get("jq"):  # KWOK v0.7's form, {jq: {expression}}, for which expressionFrom is deprecated
        _unsupported(f"{where}.jq", src["jq"], {"expression"})
        return Jq(str(src["jq"]["expression"]))
    return Jq(str(src["expressionFrom"]))


def stage_from_object(obj: dict[str, Any]) -> Stage:
    """The stage of a Stage object read from the API (``--enable-crds Stage``): its ``spec``
    as a file's, whatever ``apiVersion`` and ``kind`` a list's items carry."""
    return _parse_stage({**obj, "apiVersion": API_VERSION, "kind": "Stage"})


def load_stages(text: str) -> list[Stage]:
    """Stages from YAML (one or many documents; ``StageList``/``List`` items too). KWOK's other
    configuration documents (``KwokConfiguration`` and the like, which a KWOK config file holds
    beside its stages) are skipped, with a warning, as KWOK skips the kinds it does not use."""
    out: list[Stage] = []
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        raise StageError(f"not valid YAML: {e}") from e
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise StageError("each document must be a Stage")
        if doc.get("kind") in ("StageList", "List"):
            out.extend(_parse_stage(d) for d in doc.get("items") or [])
        elif doc.get("kind") != "Stage" and str(doc.get("apiVersion") or "").partition("/")[0] in _KWOK_GROUPS:
            name = (doc.get("metadata") or {}).get("name")
            log.warning("stages: skipping %s%s (not a Stage)%s", doc.get("kind"), f" {name}" if name else "",
                        _options_not_read(doc))
        else:
            out.append(_parse_stage(doc))
    if not out:
        raise StageError("no stages found")
    return out


# a KwokConfiguration's options this simulator takes as flags instead (of ``controlplane nodes`` and ``serve``)
_OPTION_FLAGS = {"manageAllNodes": "--manage-all-nodes", "manageNodesWithAnnotationSelector":
                 "--manage-nodes-with-annotation-selector", "manageNodesWithLabelSelector":
                 "--manage-nodes-with-label-selector", "enableCRDs": "--enable-crds"}


def _options_not_read(doc: dict[str, Any]) -> str:
    """What a skipped ``KwokConfiguration`` asked that is not done from the file: its options
    (KWOK reads them as its flags' defaults), each with the flag that does it here, if any."""
    options = doc.get("options") if doc.get("kind") == "KwokConfiguration" else None
    if not isinstance(options, dict) or not options:
        return ""
    said = [f"{k}: give {_OPTION_FLAGS[k]}" if k in _OPTION_FLAGS else f"{k}: not supported"
            for k in sorted(options)]
    return "; its options are not read from a file here (" + ", ".join(said) + ")"


_KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "metadata", "resources"}


def read_stage_files(paths: Iterable[Path]) -> str:
    """The text of ``--stages`` paths, as KWOK's ``--config`` reads them: a file as it is; a
    directory as a kustomization (KWOK builds it with kustomize), of which only ``resources`` is
    read, in order: files, and directories that are kustomizations themselves (KWOK's own
    ``kustomize/stage/fast`` names ``../node/fast``, ``../pod/fast``). Any other kustomize field
    (``patches``, ``namePrefix``...) is refused by name."""
    return "\n---\n".join(_read_resource(Path(p), ()) for p in paths)


def _read_resource(path: Path, seen: tuple[Path, ...]) -> str:
    if not path.is_dir():
        return path.read_text()
    found = next((path / n for n in _KUSTOMIZATIONS if (path / n).is_file()), None)
    if found is None:
        raise StageError(f"{path}: a directory of stages must be a kustomization: no kustomization.yaml in it")
    if found.resolve() in seen:
        raise StageError(f"{found}: a kustomization that includes itself")
    try:
        doc = yaml.load(found.read_text(), Loader=_Loader) or {}
    except yaml.YAMLError as e:
        raise StageError(f"{found}: not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise StageError(f"{found}: not a kustomization")
    _unsupported(str(found), doc, _KUSTOMIZATION_FIELDS)
    return "\n---\n".join(_read_resource(path / str(r), (*seen, found.resolve())) for r in doc.get("resources") or ())


def default_stages(job_seconds: float = 1.0) -> list[Stage]:
    """The built-in stages (``default-stages.yaml``, after KWOK's fast stages): a bound pod
    runs; a ``restartPolicy: Never`` pod succeeds after ``job_seconds`` (unless a container
    of it is restarted after its exit 0, by its own restart policy or rules); a deleted pod
    is removed when its grace period ends; a node is initialised Ready."""
    text = resources.files(__package__).joinpath("default-stages.yaml").read_text()
    text = text.replace("__JOB_MILLISECONDS__", str(round(job_seconds * 1000)))
    from .native import NATIVE

    return [dataclasses.replace(s, next=dataclasses.replace(s.next, native=NATIVE[s.name])) if s.name in NATIVE
            else s for s in load_stages(text)]


class StageSet:
    """The stages of one kind, in file order; ``rng`` draws among several that match."""

    def __init__(self, stages: Iterable[Stage], kind: str, rng: random.Random | None = None) -> None:
        self.stages = [s for s in stages if s.kind == kind]
        self.rng = rng or random.Random()

    def matching(self, obj: dict[str, Any]) -> list[Stage]:
        """The stages whose selector matches ``obj``, in file order."""
        return [s for s in self.stages if s.selector.matches(obj)]

    def choose(self, obj: dict[str, Any], matched: list[Stage]) -> Stage | None:
        """The stage to run next among ``matched`` (those that match ``obj``), KWOK's draw:

        - a single stage is chosen whatever its weight;
        - else one of those with a positive weight (``weight_for``), in proportion to it;
        - if no weight is positive, one at random among those of weight 0, or among
          all of them if none has a weight at all.

        So a stage of weight 0 runs only when no other matching stage weighs more.
        """
        if len(matched) <= 1:
            return matched[0] if matched else None
        weighed = [(s, w) for s in matched if (w := s.weight_for(obj)) is not None]
        total = sum(w for _, w in weighed)
        if total == 0:
            return self.rng.choice([s for s, _ in weighed] or matched)
        x = self.rng.randrange(total)
        for s, w in weighed:
            x -= w
            if x < 0:
                return s
        raise AssertionError("the weights sum to more than the draw")

    def select(self, obj: dict[str, Any]) -> Stage | None:
        """The stage to run next for ``obj`` (``choose`` among ``matching``), or None."""
        return self.choose(obj, self.matching(obj))

    def pending(self, name: str, obj: dict[str, Any]) -> Stage | None:
        """The stage called ``name`` if it still matches ``obj``: a pending stage whose time
        has come runs if so (drawing again could pick another of those that match)."""
        return next((s for s in self.stages if s.name == name and s.selector.matches(obj)), None)
