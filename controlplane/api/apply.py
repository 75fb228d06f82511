"""The HTTP side of server-side apply and managedFields: which manager a request
writes as, the ``PatchOptions`` checks, the applied configuration's body, and
the Status of a conflict. The field ownership itself is
``controlplane.registry.managedfields``.

    PATCH .../deployments/web?fieldManager=kubectl&force=false
    Content-Type: application/apply-patch+yaml

A conflict answers 409 with one cause per field::

    {"reason": "Conflict", "message": "Apply failed with 1 conflict: conflict with \\"kubectl-edit\\"
     using apps/v1: .spec.replicas", "details": {"causes": [{"type": "FieldManagerConflict",
     "message": "conflict with \\"kubectl-edit\\" using apps/v1", "field": ".spec.replicas"}]}}
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Hashable
from typing import Any

import orjson
import yaml

from ..gonumbers import may_hold_uint64s, may_hold_whole_floats, uint64s_written_back, whole_floats_written_back
from ..gostrings import quote
from ..registry import ResourceType
from ..registry.managedfields import (
    KUBECTL,
    LAST_APPLIED,
    SCALE_TYPE,
    Conflicts,
    apply_shape,
    manager_from_user_agent,
)
from ..registry.shapes import Shape as ApplyShape
from ..registry.strategies import default
from ..registry.typedcheck import custom_type, typed_errors
from ..registry.validation import Shape, convert_numbers, converter_error, metadata_shape, shape_of
from .errors import ApiError
from .fieldvalidation import add_warning, field_validation, note_yaml_duplicates, yaml_unmarshal_errors
from .params import flag

__all__ = ["APPLY_YAML", "ApplyOptions", "apply_defaults", "apply_options", "conflict_error", "manager_of",
           "object_gvknn", "parse_config", "parse_scale_config", "sync_last_applied"]

APPLY_YAML = "application/apply-patch+yaml"
# metadata.annotations may hold at most this many bytes, keys and values together
ANNOTATIONS_SIZE_LIMIT = 256 * 1024


# The values a YAML document that uses aliases may expand to, as go-yaml refuses
# "excessive aliasing": a few hundred bytes of nested aliases (a YAML bomb) would
# otherwise expand to gigabytes when the object is walked or serialised. A 3 MiB
# body (the limit) cannot hold more values than this without aliases.
MAX_EXPANDED_VALUES = 1_000_000


class _Loader(yaml.CSafeLoader):
    """YAML as Kubernetes reads it (sigs.k8s.io/yaml over go-yaml v2, then JSON): no timestamps
    (a date stays a string); a key that YAML reads as another scalar is the string Go writes
    for it (``on:`` is ``"true"``, ``1:`` is ``"1"``, each its own key), a null, list or map
    key an error; a float JSON cannot hold (``.nan``, ``.inf``) an error, as Go's
    ``json.Marshal``. libyaml's parser (PyYAML's own, in Python, took seconds for a large CRD)."""

    def __init__(self, stream: bytes) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []  # a key given twice in a mapping, as go-yaml's strict decoding says it

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        own = sum(k.tag != "tag:yaml.org,2002:merge" for k, _ in node.value)
        self.flatten_mapping(node)  # merge keys (<<): the merged pairs first, which the own ones override
        merged = len(node.value) - own
        mapping: dict[Hashable, Any] = {}
        own_keys: set[str] = set()
        for at, (key_node, value_node) in enumerate(node.value):
            if key_node.tag == "tag:yaml.org,2002:float":  # a .nan key is Go's ".nan", not an error
                given = self.construct_yaml_float(key_node)
            else:
                given = self.construct_object(key_node, deep=deep)
            key = _go_key(given, key_node)
            if at >= merged:
                if key in own_keys:
                    self.duplicates.append(f"line {key_node.start_mark.line + 1}: key {_go_repr(given)} "
                                           "already set in map")
                own_keys.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _go_key(key: Any, node: yaml.Node) -> str:
    """A map key as sigs.k8s.io/yaml makes it a JSON object's key."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _go_float32(key)
    kind = "<nil>" if key is None else type(key).__name__
    raise yaml.constructor.ConstructorError(None, None, f"unsupported map key of type: {kind}", node.start_mark)


def _go_repr(key: Any) -> str:
    """A key as Go's ``%#v`` prints it in go-yaml's error: a string quoted, a number or bool bare."""
    if isinstance(key, str):
        return quote(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _go_float32(value: float) -> str:
    """As Go's ``strconv.FormatFloat(v, 'g', -1, 32)`` (YAML's spelling for the three that are no
    numbers): the fewest digits that read back as the same float32, in %e past six digits."""
    if value != value:
        return ".nan"
    if value in (math.inf, -math.inf):
        return ".inf" if value > 0 else "-.inf"
    single = struct.unpack("<f", struct.pack("<f", value))[0]
    for digits in range(1, 10):
        text = f"{value:.{digits - 1}e}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    power = int(exponent)
    if power < -4 or power >= 6:
        return f"{mantissa.rstrip('0').rstrip('.') if '.' in mantissa else mantissa}e{power:+03d}"
    return f"{float(text):.{max(digits - 1 - power, 0)}f}"


def _finite_float(loader: _Loader, node: yaml.ScalarNode) -> float:
    value: float = loader.construct_yaml_float(node)
    if value != value or value in (math.inf, -math.inf):
        go = "NaN" if value != value else "+Inf" if value > 0 else "-Inf"
        raise yaml.constructor.ConstructorError(None, None, f"json: unsupported value: {go}", node.start_mark)
    return value


_Loader.add_constructor("tag:yaml.org,2002:float", _finite_float)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_document(body: bytes, duplicates: list[str] | None = None) -> Any:
    """One document, YAML or JSON, with string keys; ``yaml.YAMLError`` for a document
    that is neither, or whose aliases expand it past ``MAX_EXPANDED_VALUES`` values.
    ``duplicates``: where the keys a YAML mapping gives twice are told (the last one wins).

    A body that parses as JSON is read as JSON (kubectl sends its applied
    configurations so): JSON is YAML 1.2, and reading it as JSON also gives Go's
    reading of ``1e3`` (a number, where PyYAML's YAML 1.1 makes it a string)."""
    if body.lstrip()[:1] in (b"{", b"["):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # YAML's flow style, or not a document at all: YAML's reading and its error
    loader = _Loader(body)  # a safe loader (SafeConstructor), without timestamps
    try:
        value = loader.get_single_data()
    finally:
        loader.dispose()
    if duplicates is not None:
        duplicates.extend(loader.duplicates)
    if b"*" in body:  # an alias, maybe: its anchor's value is one object, walked each time it is used
        budget = [MAX_EXPANDED_VALUES]

        def spend(v: Any) -> None:
            budget[0] -= 1
            if budget[0] < 0:
                raise yaml.YAMLError("excessive aliasing: the document expands to too many values")
            if isinstance(v, dict):
                for item in v.values():
                    spend(item)
            elif isinstance(v, list):
                for item in v:
                    spend(item)
        spend(value)
    return value


def manager_of(query: dict[str, str], headers: dict[bytes, bytes]) -> str:
    """The manager a write is recorded under: ``fieldManager`` (held to upstream's rules with
    the write's other options: api/writeoptions.py), else the user agent's product."""
    given = query.get("fieldManager")
    if given:
        return given
    return manager_from_user_agent(headers.get(b"user-agent", b"").decode("latin-1"))


class ApplyOptions:
    __slots__ = ("force", "manager")

    def __init__(self, manager: str, force: bool) -> None:
        self.manager = manager
        self.force = force


def apply_options(query: dict[str, str], content_type: str) -> ApplyOptions | None:
    """The options of an apply patch (None for other patches); a request's are held to
    upstream's rules (a manager required, ``force`` only here) with its other options,
    before its body is read (api/writeoptions.py)."""
    if content_type != APPLY_YAML:
        return None
    return ApplyOptions(query.get("fieldManager") or "", bool(flag(query, "force")))


def yaml_as_json(body: bytes) -> bytes:
    """A YAML request body (``Content-Type: application/yaml``) as the JSON it says;
    a 400 when it is not YAML or says what JSON cannot (``!!binary``, a set)."""
    duplicates: list[str] = []
    try:
        converted = orjson.dumps(_load_document(body, duplicates) if body.strip() else None)
    except (yaml.YAMLError, RecursionError) as e:
        raise ApiError.bad_request(f"error decoding YAML: {e}") from e
    except (TypeError, orjson.JSONEncodeError) as e:
        raise ApiError.bad_request(f"the YAML body is not JSON: {e}") from e
    note_yaml_duplicates(duplicates)  # reported with the object's unknown fields, as upstream's decoder does
    return converted


def _load_config(body: bytes) -> dict[str, Any]:
    """An applied configuration's YAML (or JSON) object; a 400 for anything else."""
    duplicates: list[str] = []
    try:
        config = _load_document(body, duplicates)
        if not isinstance(config, dict):
            raise ApiError.bad_request("the applied configuration must be an object")
        # YAML has more types than JSON (!!binary, !!set): what JSON cannot say is refused
        if may_hold_whole_floats(orjson.dumps(config)):
            # upstream's apply patcher reads the YAML (go-yaml), writes it as JSON (json.Marshal:
            # 3.0 is 3) and decodes that with UseNumber: a whole float is an int64 from the start
            # (apimachinery's yaml.Unmarshal, under the field manager)
            whole_floats_written_back(config)
    except (yaml.YAMLError, RecursionError) as e:
        raise ApiError.bad_request(f"error decoding YAML: {e}") from e
    except (TypeError, orjson.JSONEncodeError) as e:
        raise ApiError.bad_request(f"the applied configuration is not JSON: {e}") from e
    if duplicates:  # upstream's apply patcher decodes the configuration strictly again to find them
        directive = field_validation()
        if directive == "Strict":
            raise ApiError.bad_request(f"error strict decoding YAML: {yaml_unmarshal_errors(duplicates)}")
        if directive == "Warn":
            for duplicate in duplicates:
                add_warning(duplicate)
    return config


def _check_object_type(rtype: ResourceType, config: dict[str, Any]) -> None:
    """An applied configuration must say its type's apiVersion and kind: the field manager's
    version check is upstream's first, 400 ``invalid object type: apps/v1, Kind=Deployment``
    for another type and ``invalid object type: /, Kind=`` for a configuration that says none
    (a status applied without them, a frequent mistake of controllers)."""
    api_version, kind = config.get("apiVersion"), config.get("kind")
    if api_version == rtype.api_version and kind == rtype.kind:
        return
    given = api_version if isinstance(api_version, str) else ""
    kind = kind if isinstance(kind, str) else ""
    slashes = given.count("/")  # Go's ParseGroupVersion fails for more than one: the whole kind is empty
    group, version = given.split("/") if slashes == 1 else ("", given) if slashes == 0 else ("", "")
    raise ApiError.bad_request(f"invalid object type: {group}/{version}, Kind={kind if slashes <= 1 else ''}")


def parse_scale_config(namespaced: bool, namespace: str | None, name: str, body: bytes) -> dict[str, Any]:
    """The configuration applied through ``/scale``: an ``autoscaling/v1`` Scale named
    ``name``. Anything else is upstream's 400 ``invalid object type: apps/v1,
    Kind=Deployment`` (its field manager checks the kind first), which is what
    ``kubectl apply --server-side --subresource=scale`` of a Deployment's file gets."""
    config = _load_config(body)
    _check_object_type(SCALE_TYPE, config)
    meta = config.get("metadata")
    if meta is None:
        meta = config["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata must be an object")
    if meta.get("managedFields") is not None:
        raise ApiError.bad_request("metadata.managedFields must be nil")
    if meta.get("name") not in (None, "", name):
        raise ApiError.name_mismatch(meta.get("name"), name)
    if namespaced and meta.get("namespace") not in (None, "", namespace):
        raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent "
                                   "on the request")
    _check_config(SCALE_TYPE, config)
    return config


def parse_config(rtype: ResourceType, namespace: str | None, name: str, body: bytes) -> dict[str, Any]:
    """The applied configuration: a full object of ``rtype`` named ``name``, as YAML or JSON."""
    config = _load_config(body)
    if rtype.custom is not None and may_hold_uint64s(body):
        # (decoded with UseNumber, then apimachinery's ConvertMapNumbers: a float64 past an int64)
        uint64s_written_back(config)
    _check_object_type(rtype, config)
    meta = config.get("metadata")
    if meta is None:
        meta = config["metadata"] = {}
    if not isinstance(meta, dict):
        raise ApiError.bad_request("metadata must be an object")
    if meta.get("name") not in (None, "", name):
        raise ApiError.name_mismatch(meta.get("name"), name)
    if rtype.namespaced and meta.get("namespace") not in (None, "", namespace):
        raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent "
                                   "on the request")
    if meta.get("managedFields") is not None:
        raise ApiError.bad_request("metadata.managedFields must be nil")
    _check_config(rtype, config)
    return config


# what every object has whatever its CRD's schema says (metadata is ObjectMeta's)
_OBJECT_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def _check_config(rtype: ResourceType, config: dict[str, Any]) -> None:
    """As upstream's field manager makes the configuration a typed value of the kind's
    schema before it merges it: a field the schema does not declare, a value of another
    type (or an integer past its Go type) cannot be, whatever ``fieldValidation`` says.
    A 400, as this server answers the configurations it cannot walk (kube-apiserver's
    error is the same, though its status code is a 500 for now). A custom resource's
    ``metadata`` is ObjectMeta whatever its CRD says, as upstream's field manager types it
    (``labels: {a: 1}`` applied was stored, then refused by every update of the object)."""
    errors: list[str] = []
    apply = apply_shape(rtype)
    if rtype.custom is not None:
        _typed_errors(metadata_shape(), apply, {"metadata": config["metadata"]}, errors)
        if rtype.custom.schema is not None:  # the rest by its CRD's schema
            errors += typed_errors(custom_type(rtype.custom.schema), apply,
                                   {k: v for k, v in config.items() if k not in _OBJECT_FIELDS})
    shape = shape_of(rtype.group, rtype.version, rtype.kind)
    unconverted = _typed_errors(shape, apply, config, errors) if shape is not None else None
    if errors:
        why = errors[0] if len(errors) == 1 else "errors:\n" + "\n".join("  " + e for e in errors)
        raise ApiError.bad_request(f"failed to create typed patch object ({object_gvknn(rtype, config)}): {why}")
    if unconverted is not None:
        # upstream's merge took it (a typed value's number is any number); its converter to the
        # Go type then refuses it, a 500 there (structuredmerge.go, toVersioned), a 400 here. Its
        # conflicts would have been reported first
        raise ApiError.bad_request(f"failed to convert new object ({object_gvknn(rtype, config)}) to proper "
                                   f"version: unable to convert unstructured object to {rtype.group}/"
                                   f"{rtype.version}, Kind={rtype.kind}: {unconverted}")


def object_gvknn(rtype: ResourceType, config: dict[str, Any]) -> str:
    """An applied configuration as upstream's field manager names it in its errors
    (structuredmerge.go ``objectGVKNN``): its own namespace and name, which it may leave out,
    and its kind as ``GroupVersionKind.String`` writes it, ``default/d; apps/v1, Kind=Deployment``,
    ``/c; /v1, Kind=ConfigMap``."""
    meta = config.get("metadata")
    namespace, name = (meta.get("namespace") or "", meta.get("name") or "") if isinstance(meta, dict) else ("", "")
    return f"{namespace}/{name}; {rtype.group}/{rtype.version}, Kind={rtype.kind}"


def _typed_errors(shape: Shape, apply: ApplyShape | None, config: dict[str, Any], errors: list[str]) -> str | None:
    """What keeps ``config`` from being a typed value of ``shape``, in structured-merge-diff's
    words (``typedcheck``: ``.spec.replicas: expected numeric (int or float), got string``,
    ``apply`` naming the associative lists' items, ``[name="c"]``); returns the unstructured
    converter's error for a number the typed value takes and the Go type does not (3.5 for an
    int32: structured-merge-diff's ``validateScalar`` takes any number for a ``Numeric``, and
    anything for an IntOrString), else None. Numbers the converter takes are converted in
    place (an int past an int32 keeps its low bits, as Go's conversion)."""
    found = shape.check(config, count_keys=False)
    if found.numbers and convert_numbers(found.numbers):
        found = shape.check(config, count_keys=False)
    typed = typed_errors(shape, apply, config)
    if not typed:  # (what the walk above alone finds: a Quantity or Time that does not parse)
        typed = [f".{path}: expected {expected}, got {given}" for path, given, expected in found.mismatched
                 if not given.startswith("number ")]
        typed += [p for p in found.malformed if not p.startswith(_INT_OR_STRING_NUMBER)]
    errors += typed
    numbers = [m for m in found.mismatched if m[1].startswith("number ")]  # (a float for an int)
    if numbers:
        return converter_error(shape, config, numbers[0][0]) or "cannot convert float64 to int"
    return next((p for p in found.malformed if p.startswith(_INT_OR_STRING_NUMBER)), None)


# an IntOrString's UnmarshalJSON refusing a number (3.5, past an int32): the converter's error
_INT_OR_STRING_NUMBER = "json: cannot unmarshal number "


# Built-in types whose create-time defaults allocate (a Service's cluster IPs and node
# ports): an update keeps what was allocated and then defaults the rest itself (their
# ``prepare``), so an apply must not allocate anew what it removed.
_DEFAULTED_ON_UPDATE = frozenset({"services"})


def apply_defaults(rtype: ResourceType) -> Callable[[dict[str, Any]], None] | None:
    """What fills in ``rtype``'s defaults after an apply changed an existing object
    (``managedfields.apply``), as upstream's apply defaults the object it made: a
    Secret whose ``type`` nobody applies any more is ``Opaque`` again. None for custom
    resources (their schema's defaults come with every write) and the types above."""
    if rtype.custom is not None or rtype.group or rtype.plural in _DEFAULTED_ON_UPDATE:
        return None
    plural = rtype.plural
    return lambda obj: default(plural, obj)


def conflict_error(conflicts: Conflicts) -> ApiError:
    causes = [{"type": "FieldManagerConflict", "message": f"conflict with {c.manager}", "field": c.path}
              for c in conflicts.conflicts]
    return ApiError(409, "Conflict", conflicts.message(), {"causes": causes})


# What Go's encoding/json escapes in strings that orjson writes as they are.
_GO_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028",
               0x2029: "\\u2029"}


def sync_last_applied(manager: str, config: dict[str, Any], obj: dict[str, Any]) -> None:
    """As upstream's lastAppliedUpdater: an apply by ``kubectl`` (``kubectl apply
    --server-side``) to an object that has a client-side apply annotation
    (``kubectl.kubernetes.io/last-applied-configuration``) rewrites it to the applied
    configuration (without that annotation; JSON as Go encodes it), so a later
    client-side ``kubectl apply`` merges against what was applied last. An annotation
    that would pass the annotations' size limit is dropped instead. Other managers opt
    out. ``obj`` (the apply's result) is changed in place."""
    if manager != KUBECTL:
        return
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or not annotations.get(LAST_APPLIED):
        return
    applied = dict(config)
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict):
        applied_meta = applied["metadata"] = dict(applied_meta)
        sent = applied_meta.get("annotations")
        if isinstance(sent, dict):
            applied_meta["annotations"] = {k: v for k, v in sent.items() if k != LAST_APPLIED}
        elif "annotations" in applied_meta:
            del applied_meta["annotations"]
    value = orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode().translate(_GO_ESCAPES) + "\n"
    annotations = {**annotations, LAST_APPLIED: value}
    if sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items()) > ANNOTATIONS_SIZE_LIMIT:
        del annotations[LAST_APPLIED]
    meta["annotations"] = annotations
