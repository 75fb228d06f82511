"""A pod's Secrets and ConfigMaps, checked as a kubelet needs them before it starts the pod.

Two places of a 1.3x kubelet, in their words:

- the volume manager sets up each volume before the containers are made: a ``secret``,
  ``configMap`` or ``projected`` volume whose object (or an ``items`` key) is missing, and not
  ``optional``, fails (``pkg/volume/secret``, ``configmap``, ``projected``'s ``SetUpAt``), so
  the pod stays ``ContainerCreating`` with a Warning ``FailedMount`` ``MountVolume.SetUp failed
  for volume "v" : secret "x" not found`` (the secret and configmap managers' NotFound:
  ``secret "x" not found``, ``configmap "x" not found``; a key: ``references non-existent
  secret key: k``, ``configmap references non-existent config key: k``; a projected volume's
  failing sources as one aggregate, ``[a, b]`` when there are several);
- ``makeEnvironmentVariables`` (``pkg/kubelet/kubelet_pods.go``), as a container is created
  after its image is pulled: ``envFrom`` first, then ``env``; the first missing object or
  key, not ``optional``, fails the container: it waits in ``CreateContainerConfigError`` with
  that message, and a Warning ``Failed`` ``Error: <message>`` is recorded about it
  (``kuberuntime``'s ``startContainer``). A ConfigMap's key is looked up in ``data`` only.

The functions take the Secrets and ConfigMaps as mappings of ``namespace/name`` (the
simulator's informers); each failure names what it waits for, ``(kind, "ns/name")``, so the
pod is looked at again when that object is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Ref", "env_error", "has_env_refs", "has_volume_refs", "volume_errors"]

TOKEN_VOLUME_PREFIX = "kube-api-access-"  # (api/serviceaccount.py's VOLUME_PREFIX)
Ref = tuple[str, str]  # ("secret" | "configmap", "namespace/name")
Objects = Mapping[str, Any]


def _optional(source: Mapping[str, Any]) -> bool:
    return source.get("optional") is True


def _not_found(kind: str, name: str) -> str:
    return f'{kind} "{name}" not found'


def _keys(obj: Mapping[str, Any], *fields: str) -> set[str]:
    keys: set[str] = set()
    for f in fields:
        keys.update(obj.get(f) or ())
    return keys


def _items_error(kind: str, obj: Mapping[str, Any], items: Iterable[Any], optional: bool) -> str | None:
    """A volume source's ``items`` naming a key its object lacks (MakePayload's error)."""
    if optional or not items:
        return None
    keys = _keys(obj, "data") if kind == "secret" else _keys(obj, "data", "binaryData")
    for item in items:
        key = item.get("key") if isinstance(item, dict) else None
        if key is not None and key not in keys:
            return f"references non-existent secret key: {key}" if kind == "secret" \
                else f"configmap references non-existent config key: {key}"
    return None


def _source_error(kind: str, ns: str, name: str, items: Any, optional: bool, secrets: Objects,
                  configmaps: Objects) -> str | None:
    obj = (secrets if kind == "secret" else configmaps).get(f"{ns}/{name}")
    if obj is None:
        return None if optional else _not_found(kind, name)
    return _items_error(kind, obj, items or (), optional)


def _token_volume(v: Mapping[str, Any]) -> bool:
    """The ServiceAccount admission's ``kube-api-access-*`` volume: its ``kube-root-ca.crt``
    is published in every namespace by the root CA publisher (kube-controller-manager's), and
    its token is not simulated; not checked, so a pod whose only volume it is costs nothing."""
    return "projected" in v and str(v.get("name") or "").startswith(TOKEN_VOLUME_PREFIX)


def has_volume_refs(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` has a volume a Secret or ConfigMap fills (the token volume aside)."""
    for v in (pod.get("spec") or {}).get("volumes") or ():
        if isinstance(v, dict) and ("secret" in v or "configMap" in v or "projected" in v) and not _token_volume(v):
            return True
    return False


def volume_errors(pod: Mapping[str, Any], secrets: Objects, configmaps: Objects) -> list[tuple[str, set[Ref]]]:
    """Each volume of ``pod`` that cannot be set up: the ``FailedMount`` message, and the
    objects it waits for."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "")
    failed: list[tuple[str, set[Ref]]] = []
    for v in (pod.get("spec") or {}).get("volumes") or ():
        if not isinstance(v, dict) or _token_volume(v):
            continue
        errors: list[str] = []
        waits: set[Ref] = set()
        sources: list[tuple[str, dict[str, Any], str]] = []  # (kind, source, its object's name)
        if isinstance(v.get("secret"), dict):
            sources.append(("secret", v["secret"], str(v["secret"].get("secretName") or "")))
        elif isinstance(v.get("configMap"), dict):
            sources.append(("configmap", v["configMap"], str(v["configMap"].get("name") or "")))
        elif isinstance(v.get("projected"), dict):
            for s in v["projected"].get("sources") or ():
                if isinstance(s, dict) and isinstance(s.get("secret"), dict):
                    sources.append(("secret", s["secret"], str(s["secret"].get("name") or "")))
                elif isinstance(s, dict) and isinstance(s.get("configMap"), dict):
                    sources.append(("configmap", s["configMap"], str(s["configMap"].get("name") or "")))
        for kind, source, name in sources:
            error = _source_error(kind, ns, name, source.get("items"), _optional(source), secrets, configmaps)
            if error is not None:
                if error not in errors:  # (the aggregate prints each message once)
                    errors.append(error)
                waits.add((kind, f"{ns}/{name}"))
        if errors:
            text = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
            failed.append((f'MountVolume.SetUp failed for volume "{v.get("name", "")}" : {text}', waits))
    return failed


def env_error(container: Mapping[str, Any], ns: str, secrets: Objects, configmaps: Objects) -> tuple[str, Ref] | None:
    """Why ``container``'s environment cannot be made (the first failure, as
    makeEnvironmentVariables returns it), and the object it waits for; None if it can."""
    for source in container.get("envFrom") or ():
        if not isinstance(source, dict):
            continue
        for field, kind in (("configMapRef", "configmap"), ("secretRef", "secret")):
            ref = source.get(field)
            if isinstance(ref, dict):
                name = str(ref.get("name") or "")
                if f"{ns}/{name}" not in (secrets if kind == "secret" else configmaps) and not _optional(ref):
                    return _not_found(kind, name), (kind, f"{ns}/{name}")
    for var in container.get("env") or ():
        value_from = var.get("valueFrom") if isinstance(var, dict) else None
        if not isinstance(value_from, dict):
            continue
        for field, kind, what in (("configMapKeyRef", "configmap", "ConfigMap"), ("secretKeyRef", "secret", "Secret")):
            ref = value_from.get(field)
            if not isinstance(ref, dict):
                continue
            name, key = str(ref.get("name") or ""), str(ref.get("key") or "")
            obj = (secrets if kind == "secret" else configmaps).get(f"{ns}/{name}")
            if _optional(ref):
                continue
            if obj is None:
                return _not_found(kind, name), (kind, f"{ns}/{name}")
            if key not in _keys(obj, "data"):
                return f"couldn't find key {key} in {what} {ns}/{name}", (kind, f"{ns}/{name}")
    return None


def has_env_refs(container: Mapping[str, Any]) -> bool:
    """Whether ``container`` takes any of its environment from a Secret or ConfigMap."""
    if container.get("envFrom"):
        return True
    return any(isinstance(v, dict) and isinstance(v.get("valueFrom"), dict)
               and ("secretKeyRef" in v["valueFrom"] or "configMapKeyRef" in v["valueFrom"])
               for v in container.get("env") or ())
