"""The parameters of admission policies: a policy's ``paramKind`` and a binding's ``paramRef``,
resolved per request as upstream's ``CollectParams``
(``k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go``), for the
validating (``api/admissionpolicy.py``) and the mutating (``api/mutatingpolicy.py``) plugins.

- A policy without ``paramKind``, or a binding without ``paramRef``: one invocation with a
  null ``params``.
- A ``paramKind`` this server does not serve (no type of that group, version and kind): the
  policy's configuration error, ``failed to find resource referenced by paramKind:
  'rules.example.com/v1, Kind=ReplicaLimit'`` (upstream's ``ensureParamsForPolicyLocked``),
  which the caller reports under the policy's ``failurePolicy``.
- A namespaced kind is read in ``paramRef.namespace``, else in the request's namespace (a
  request outside any: ``cannot use namespaced paramRef in policy binding that matches
  cluster-scoped resources``); a cluster-scoped kind with a ``paramRef.namespace`` is
  ``paramRef.namespace must not be provided for a cluster-scoped `paramKind```.
- ``name``: that object; ``selector``: every object it selects (``{}``: all), in name order;
  the policy is then evaluated once per object.
- None found: ``parameterNotFoundAction: Deny`` is ``no params found for policy binding with
  `Deny` parameterNotFoundAction``, ``Allow`` no invocation at all.

The objects are read from the watch cache as the other admission plugins read (the store when
the cache has none yet), in the version the ``paramKind`` names. Nothing is read for a policy
without ``paramKind``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..registry.types import ResourceType
from ..selectormatch import match_label_selector
from .converting import unconverted

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["ParamError", "PolicyParams"]

Obj = dict[str, Any]


class ParamError(Exception):
    """A configuration error of a policy (``binding`` False: its ``paramKind`` is not served)
    or of one of its bindings (its ``paramRef`` finds nothing, or cannot be used): upstream's
    ``failed to configure policy: ...`` / ``failed to configure binding: ...``."""

    def __init__(self, message: str, binding: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.binding = binding

    @property
    def configured(self) -> str:
        """The message as upstream's dispatcher wraps it."""
        return f"failed to configure {'binding' if self.binding else 'policy'}: {self.message}"


def _group_version(api_version: str) -> tuple[str, str] | None:
    """Upstream's ``schema.ParseGroupVersion``: ``v1`` is the core group's, ``g/v`` a group's;
    None for more than one slash."""
    if not api_version or api_version == "/":
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return None


class PolicyParams:
    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube

    def param_type(self, param_kind: Obj) -> ResourceType | None:
        """The served type of a policy's ``paramKind`` (raises ``ParamError`` when none is;
        None for an ``apiVersion`` upstream cannot parse: such a policy is not applied)."""
        parsed = _group_version(str(param_kind.get("apiVersion") or ""))
        if parsed is None:
            return None
        group, version = parsed
        kind = str(param_kind.get("kind") or "")
        for rtype in self.kube.registry.in_group_version(group, version):
            if rtype.kind == kind and "get" in rtype.verbs and "list" in rtype.verbs:
                return rtype
        raise ParamError(f"failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'",
                         binding=False)

    async def collect(self, rtype: ResourceType | None, ref: Any, namespace: str | None) -> list[Obj | None]:
        """The params of one binding (``ref``: its ``paramRef``) of a policy whose ``paramKind``
        is served as ``rtype`` (None: the policy has none): ``[None]`` when either is missing;
        raises ``ParamError``."""
        if rtype is None or not isinstance(ref, dict):
            return [None]
        where: str | None = None
        if rtype.namespaced:
            where = str(ref.get("namespace") or "") or namespace or ""
            if not where:
                raise ParamError("cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                                 "resources")
        elif ref.get("namespace"):
            raise ParamError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
        name, selector = ref.get("name"), ref.get("selector")
        if name:
            if selector is not None:
                raise ParamError("paramRef.name and paramRef.selector are mutually exclusive")
            with unconverted():  # (within a request for a converted type, the params in their own)
                raw = await self.kube.reads.get(rtype, where, str(name), "0")
            found = await self._served(rtype, [raw] if raw is not None else [])
        elif selector is not None:
            with unconverted():
                listed = await self.kube._list(rtype, where, {"resourceVersion": "0"})
            raws = [raw for raw in listed.items if _selected(selector, raw)]
            found = sorted(await self._served(rtype, raws), key=lambda o: (o.get("metadata") or {}).get("name", ""))
        else:
            raise ParamError("one of name or selector must be provided")
        if not found and ref.get("parameterNotFoundAction") == "Deny":
            raise ParamError("no params found for policy binding with `Deny` parameterNotFoundAction")
        return list(found)

    async def _served(self, rtype: ResourceType, raws: list[bytes]) -> list[Obj]:
        """Cached objects as ``rtype``'s version serves them (a custom resource's other
        versions converted, by its webhook too)."""
        if not raws:
            return []
        return [orjson.loads(raw) for raw in await self.kube.served(rtype, raws)]


def _selected(selector: Any, raw: bytes) -> bool:
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return True  # an empty selector selects everything, as upstream's LabelSelectorAsSelector
    labels = (orjson.loads(raw).get("metadata") or {}).get("labels") or {}
    return match_label_selector(selector, labels)
