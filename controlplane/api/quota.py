"""ResourceQuota admission: a create in a namespace with quotas is charged to them, or refused.

As upstream's quota admission plugin: for each quota of the namespace whose
scopes cover the new object (``registry/quota.py``), what the object uses of the
quota's ``hard`` resources is added to the quota's ``status.used``, written with
the quota's resourceVersion as a precondition (a conflict is read again and
retried), before the object itself is stored. A quota that would go over its
limit refuses the create (403 ``exceeded quota``); so does one whose usage the
quota controller has not computed yet (403 ``status unknown for quota``), and,
for a pod, a compute resource the quota limits that a container does not state
(403 ``failed quota ... must specify``). Usage freed by deletions is given back
by the quota controller's recalculation (``controllers/quota.py``), as upstream.

A pod's resize (``pods/resize``) is charged too, as upstream's pod evaluator takes it:
what the pod uses after it beyond what it used before, checked and written the same way
(what went up is held to ``hard``, in the same 403; a shrink charges nothing and is given
back by the controller's recount, as upstream's delta is never negative). Only the
resources whose usage goes up are checked, as upstream drops the zeros: a quota already
over on one resource (its ``hard`` lowered since) does not refuse a write that adds none of it.

Every create asks, so the namespace's quotas are memoised per generation of the
ResourceQuota watch cache: a cluster without quotas pays one dictionary lookup.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

import store

from ..quantity import QuantityError, format_quantity, parse_quantity
from ..registry.quota import covers, pod_counts, tracked, unspecified, usage
from ..registry.types import ResourceType
from .converting import unconverted
from .dryrun import DRY_RUN
from .errors import ApiError
from .namespaced import NamespacedObjects

if TYPE_CHECKING:
    from .rest import KubeApi

__all__ = ["QuotaAdmission"]

Obj = dict[str, Any]
ATTEMPTS = 16


def _forbidden(rtype: ResourceType, name: str, message: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{rtype.plural}{"." + rtype.group if rtype.group else ""} "{name}" is '
                                      f"forbidden: {message}", ApiError._details(rtype, name))  # no empty group


def _shown(values: dict[str, Fraction]) -> str:
    return ",".join(f"{k}={format_quantity(v)}" for k, v in sorted(values.items()))


class QuotaAdmission:
    def __init__(self, kube: KubeApi, quotas: ResourceType) -> None:
        self.kube = kube
        self.quotas = quotas
        self._listed = NamespacedObjects(kube, quotas)

    async def _of(self, namespace: str) -> list[Obj]:
        return await self._listed.of(namespace)

    async def charge(self, rtype: ResourceType, namespace: str | None, obj: Obj) -> None:
        """Charge the new ``obj`` to its namespace's quotas, or raise the 403 that refuses it."""
        if not namespace or rtype.custom is not None or DRY_RUN.get() or not await self._of(namespace):
            return
        with unconverted():  # the quotas in their stored shape, whatever type is being created
            await self._charge(rtype, namespace, obj)

    async def charge_resize(self, rtype: ResourceType, namespace: str | None, pod: Obj, old: Obj) -> None:
        """Charge a pod's resize (``pods/resize``, ``old`` the pod before it) to its namespace's
        quotas: what it uses after beyond what it used before (never less than nothing: a shrink
        is given back by the controller's recount), or raise the 403 that refuses it. An ended pod uses nothing
        either side (upstream's evaluator counts only its object then)."""
        if not namespace or DRY_RUN.get() or not pod_counts(old) or not await self._of(namespace):
            return
        with unconverted():
            await self._charge(rtype, namespace, pod, old)

    async def _charge(self, rtype: ResourceType, namespace: str, obj: Obj, old: Obj | None = None) -> None:
        name = (obj.get("metadata") or {}).get("name") or (obj.get("metadata") or {}).get("generateName", "")
        used = usage(rtype.group, rtype.plural, obj)
        unchanged = False
        if old is not None:  # an update: what goes up (upstream's deltaUsage, SubtractWithNonNegativeResult:
            # a shrink is given back by the controller's recount, not here), none if nothing does
            before = usage(rtype.group, rtype.plural, old)
            used = {r: max(used.get(r, Fraction(0)) - before.get(r, Fraction(0)), Fraction(0))
                    for r in used.keys() | before.keys()}
            unchanged = not any(used.values())
        charged: set[str] = set()  # quotas written already: a retry charges only the others
        for _attempt in range(ATTEMPTS):
            charges: list[tuple[bytes, Obj, int, dict[str, Fraction]]] = []
            for listed in await self._of(namespace):
                if listed["metadata"]["name"] in charged or not covers(listed, rtype.group, rtype.plural, obj):
                    continue
                qname = listed["metadata"]["name"]
                key = self.quotas.key(namespace, qname)
                kv = await self.kube.store.get(key)
                if kv is None:
                    continue
                quota = orjson.loads(kv.value)
                if rtype.plural == "pods" and not rtype.group:  # upstream's Constraints: before any usage
                    missing = unspecified(quota, obj)
                    if missing:
                        raise _forbidden(rtype, name, f"failed quota: {qname}: must specify {'; '.join(missing)}")
                increment = tracked(quota, used)
                if not increment:
                    continue
                status = quota.get("status") or {}
                hard, now = status.get("hard") or {}, status.get("used") or {}
                unknown = sorted(r for r in increment if r not in hard or r not in now)
                if unknown:
                    raise _forbidden(rtype, name, f"status unknown for quota: {qname}, resources: {','.join(unknown)}")
                increment = {r: v for r, v in increment.items() if v}  # upstream's RemoveZeros: not checked
                if unchanged or not increment:
                    continue  # an update that uses no more than it used: checked, nothing to charge
                try:
                    after = {r: parse_quantity(now[r]) + v for r, v in increment.items()}
                    over = {r: v for r, v in after.items() if v > parse_quantity(hard[r])}
                except QuantityError as e:  # a status someone wrote by hand: not usable until recounted
                    raise _forbidden(rtype, name, f"status unknown for quota: {qname}: {e}") from e
                if over:
                    raise _forbidden(rtype, name, (
                        f"exceeded quota: {qname}, requested: {_shown({r: increment[r] for r in over})}, "
                        f"used: {_shown({r: parse_quantity(now[r]) for r in over})}, "
                        f"limited: {_shown({r: parse_quantity(hard[r]) for r in over})}"))
                charges.append((key, quota, kv.mod_revision, after))
            try:
                for key, quota, revision, after in charges:
                    status = quota.setdefault("status", {})
                    status["used"] = {**(status.get("used") or {}),
                                      **{r: format_quantity(v) for r, v in after.items()}}
                    await self.kube._replace(self.quotas, key, quota["metadata"]["name"], quota, revision)
                    charged.add(quota["metadata"]["name"])
                return
            except (store.Conflict, store.NotFound):
                continue  # another create charged it meanwhile: read again (a charge made stays)
        raise ApiError(409, "Conflict", "the resource quota kept changing; try again")
