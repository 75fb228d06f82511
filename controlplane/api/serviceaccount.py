"""ServiceAccount admission: a new pod runs as a ServiceAccount that exists, and gets its
API credentials as a projected volume.

As upstream's plugin (``plugin/pkg/admission/serviceaccount``), on a pod's create:

- a pod that names no ServiceAccount gets ``default`` (``spec.serviceAccountName``, and
  the deprecated ``spec.serviceAccount`` that mirrors it);
- the ServiceAccount must exist, whether or not a token is mounted: else 403
  ``pods "p" is forbidden: error looking up service account ns/sa: serviceaccount "sa"
  not found``. A miss in the watch cache is asked of the store, and ``default`` (made
  with its namespace, ``KubeApi._default_service_account``, a moment after the namespace
  itself) up to ``DEFAULT_ACCOUNT_ATTEMPTS`` times, as upstream retries it;
- unless the pod's ``automountServiceAccountToken``, else the ServiceAccount's, is false:
  every container and init container that mounts nothing at ``MOUNT_PATH`` gets a
  read-only mount of a projected volume ``kube-api-access-<5 random characters>`` (a
  bound token of 3607 s, the ``kube-root-ca.crt`` ConfigMap's ``ca.crt``, the namespace),
  added unless the pod has a ``kube-api-access-*`` volume already, whose name is used;
  a pod whose containers all mount that path already (podgen's) is left as it is;
- a pod without ``imagePullSecrets`` gets the ServiceAccount's.

Mirror pods (a kubelet's static pods, annotated ``kubernetes.io/config.mirror``) are not
changed, and are refused if they name a ServiceAccount, reference a Secret or project a
token. Ephemeral containers are never given the mount: upstream admits only creates, and
``kubectl debug`` adds them by an update of the ``ephemeralcontainers`` subresource.

ServiceAccounts are memoised per watch-cache generation (a create asks a dictionary).
Not done: the ``kubernetes.io/enforce-mountable-secrets`` annotation's checks.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any

import orjson

from ..registry.types import ResourceType
from .errors import ApiError
from .uids import random_suffix

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["MIRROR_ANNOTATION", "MOUNT_PATH", "VOLUME_PREFIX", "ServiceAccountAdmission", "token_volume"]

Obj = dict[str, Any]

DEFAULT_ACCOUNT = "default"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
TOKEN_SECONDS = 3607  # upstream's WarnOnlyBoundTokenExpirationSeconds (an hour, and 7 s that mark it)
DEFAULT_ACCOUNT_ATTEMPTS = 10  # store reads of a missing ``default``, as upstream's getServiceAccount
RETRY_SECONDS = (0.1, 0.2)  # between them: uniform in this range, as upstream


def token_volume(name: str) -> Obj:
    """The projected volume upstream's ``TokenVolumeSource`` describes, in its field order."""
    return {"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ], "defaultMode": 420}}


def _forbidden(pod: Obj, why: str) -> ApiError:
    meta = pod.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or ""
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', {"name": name, "kind": "pods"})


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class ServiceAccountAdmission:
    def __init__(self, kube: KubeApi, accounts: ResourceType) -> None:
        self._kube, self._type = kube, accounts
        # (cache generation, ServiceAccounts by (namespace, name)); a miss is not kept
        self._memo: tuple[int | None, dict[tuple[str, str], Obj]] = (None, {})

    async def admit(self, namespace: str, pod: Obj) -> None:
        """Admit ``pod``, about to be created in ``namespace`` (defaulted; changed in place)."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        annotations = (pod.get("metadata") or {}).get("annotations")
        if isinstance(annotations, dict) and MIRROR_ANNOTATION in annotations:
            _check_mirror(pod, spec)
            return
        name = spec.get("serviceAccountName") or DEFAULT_ACCOUNT
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        account = await self._account(namespace, name)
        if account is None:
            raise _forbidden(pod, f'error looking up service account {namespace}/{name}: '
                                  f'serviceaccount "{name}" not found')
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = account.get("automountServiceAccountToken")
        if automount is not False:
            _mount_token(spec)
        pull_secrets = account.get("imagePullSecrets")
        if not spec.get("imagePullSecrets") and pull_secrets:
            spec["imagePullSecrets"] = [{"name": s.get("name", "")} for s in _dicts(pull_secrets)]

    async def _account(self, namespace: str, name: str) -> Obj | None:
        """The ServiceAccount, from the watch cache as it is; on a miss, from the store."""
        reads = self._kube.reads
        generation = reads.generation(self._type)
        memo = self._memo
        if generation is not None and memo[0] == generation:
            found = memo[1].get((namespace, name))
            if found is not None:
                return found
        raw = await reads.get(self._type, namespace, name, "0")
        if raw is None:
            raw = await self._stored(namespace, name)
            return orjson.loads(raw) if raw is not None else None
        account: Obj = orjson.loads(raw)
        if generation is not None and generation == reads.generation(self._type):  # the cache's answer
            if memo[0] != generation:
                memo = self._memo = (generation, {})
            memo[1][(namespace, name)] = account
        return account

    async def _stored(self, namespace: str, name: str) -> bytes | None:
        """The ServiceAccount's JSON in the store (upstream's live lookup); ``default``, which
        its namespace's create makes just after the namespace, asked again a few times."""
        key = self._type.key(namespace, name)
        for attempt in range(DEFAULT_ACCOUNT_ATTEMPTS if name == DEFAULT_ACCOUNT else 1):
            if attempt:
                await asyncio.sleep(random.uniform(*RETRY_SECONDS))
            kv = await self._kube.store.get(key)
            if kv is not None:
                return kv.value
        return None


def _mount_token(spec: Obj) -> None:
    """Upstream's mountServiceAccountToken: the mount in every container and init container
    without one at ``MOUNT_PATH``, and the volume it names if there is none yet."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        volumes = None
    existing = None
    for v in volumes or ():
        if isinstance(v, dict) and str(v.get("name", "")).startswith(VOLUME_PREFIX):
            existing = v["name"]
            break
    volume_name = existing or VOLUME_PREFIX + random_suffix(5)
    needed = False
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        for c in containers if isinstance(containers, list) else ():
            if not isinstance(c, dict):
                continue
            mounts = c.get("volumeMounts")
            if not isinstance(mounts, list):
                mounts = c["volumeMounts"] = []
            elif _mounts_token_path(mounts):
                continue
            mounts.append({"name": volume_name, "readOnly": True, "mountPath": MOUNT_PATH})
            needed = True
    if needed and existing is None:
        if volumes is None:
            volumes = spec["volumes"] = []
        volumes.append(token_volume(volume_name))


def _mounts_token_path(mounts: list[Any]) -> bool:
    return any(isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH for m in mounts)


def _check_mirror(pod: Obj, spec: Obj) -> None:
    """Upstream's checks of a mirror pod: it may not name a ServiceAccount, reference a
    Secret (as ``VisitPodSecretNames`` finds them) or project a token."""
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        raise _forbidden(pod, "a mirror pod may not reference service accounts")
    if _references_secrets(spec):
        raise _forbidden(pod, "a mirror pod may not reference secrets")
    for volume in _dicts(spec.get("volumes")):
        projected = volume.get("projected")
        sources = projected.get("sources") if isinstance(projected, dict) else None
        if any("serviceAccountToken" in s for s in _dicts(sources)):
            raise _forbidden(pod, "a mirror pod may not use ServiceAccountToken volume projections")


# volume sources that name a Secret: by ``secretRef`` (cephfs, cinder, flexVolume, rbd,
# scaleIO, iscsi, storageos), and these fields
_SECRET_FIELDS = {"secret": "secretName", "azureFile": "secretName", "csi": "nodePublishSecretRef"}


def _references_secrets(spec: Obj) -> bool:
    if _dicts(spec.get("imagePullSecrets")):
        return True
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in _dicts(spec.get(key)):
            if any(isinstance(e.get("secretRef"), dict) for e in _dicts(c.get("envFrom"))):
                return True
            if any(isinstance((e.get("valueFrom") or {}).get("secretKeyRef"), dict) for e in _dicts(c.get("env"))):
                return True
    for volume in _dicts(spec.get("volumes")):
        for kind, source in volume.items():
            if not isinstance(source, dict):
                continue
            if source.get("secretRef") or source.get(_SECRET_FIELDS.get(kind, "secretRef")):
                return True
            if kind == "projected" and any("secret" in s for s in _dicts(source.get("sources"))):
                return True
    return False
