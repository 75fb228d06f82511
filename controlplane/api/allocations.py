"""Services' cluster IPs and node ports: each one a key of its own in the store, claimed
with the store's create-if-absent before the Service is written.

kube-apiserver (1.33+, the MultiCIDRServiceAllocator) records every allocated cluster IP
as an ``IPAddress`` object (``networking.k8s.io/v1``, named by the address, its
``spec.parentRef`` the Service) and allocates by creating it: a create that finds the
object there already is a collision, and the allocator tries another address
(``pkg/registry/core/service/ipallocator/ipallocator.go``). The store is the arbiter, so
two writes can never both get an address, whether they run in one API server process or
in several over one store (``serve --workers N``, or replicas over etcd). Here the same:

- ``/registry/ipaddresses/<ip>`` holds an IPAddress as upstream stores it (served as
  ``networking.k8s.io/v1`` ``ipaddresses``: one created there by hand reserves its address,
  and a Service asking for it gets the allocator's 422),
  ``/registry/servicenodeports/<port>`` one per node port, shaped
  alike (upstream keeps one bitmap for node ports, ``/registry/ranges/servicenodeports``,
  updated by compare-and-swap; a key per port needs no read-modify-write and shares the
  IP's code).
- A write picks values (``ServiceWrite.cluster_ip``, ``node_port``) from what this process
  believes taken (``Hint``: seeded and corrected by the repair pass, kept up by its own
  claims and releases; never trusted for correctness), then claims every value its
  Service did not hold already (``reserve``). A value picked here and found taken is
  picked again; one the client asked for is refused (422, the allocator's words).
- What a failed write claimed is deleted again (``abort``); what a Service no longer holds
  after an update or its delete is released (``release``), each by a delete that expects
  the revision it read, and only when it names that Service.
- A process that dies between the claim and the Service's write leaks the claim; a Service
  stored without its claims (data written before this, or a race noted at ``release``)
  lacks them. ``repair`` (at start and every ``REPAIR_INTERVAL``, in every process, as
  upstream's repair controllers) reads the claims and the Services at one revision,
  creates the missing claims and deletes those no Service holds once they are older than
  ``leak_grace`` (upstream's 60 s: a claim younger than that may be a write in flight).
  An IPAddress without the allocator's ``managed-by`` label is someone else's: the repair
  leaves it alone, as upstream's ``RepairIPAddress``.
- The cluster IPs a Service holds are those in a Service range: the default
  ``SERVICE_CIDR`` and the CIDRs of the ServiceCIDRs (``ranges``, set by the API from its
  watch cache before each Service's write, and by the repair from the store). New addresses
  are picked from the default range (2^20 of them); one asked for may be in any range but
  one of a ServiceCIDR being deleted (``open_ranges``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

import store
from store import Store

from ..registry import ResourceType
from ..registry.servicecidrs import networks
from ..registry.strategies import (
    NODE_PORTS,
    SERVICE_CIDR,
    SERVICE_PICKS,
    free_cluster_ip,
    free_node_port,
    taken_health_check_port,
    taken_ip_cause,
    taken_port_causes,
)
from .dryrun import DRY_RUN
from .errors import ApiError
from .uids import new_uid

__all__ = ["IP_PREFIX", "PORT_PREFIX", "REPAIR_INTERVAL", "ServiceAllocations", "ServiceWrite", "held"]

log = logging.getLogger(__name__)

IP_PREFIX = b"/registry/ipaddresses/"  # upstream's key of networking.k8s.io/v1 IPAddress
PORT_PREFIX = b"/registry/servicenodeports/"
CIDR_PREFIX = b"/registry/servicecidrs/"  # networking.k8s.io/v1 ServiceCIDRs: the ranges
MANAGED_BY = "ipallocator.k8s.io"  # upstream's ipallocator.ControllerName
MANAGED_BY_LABEL = "ipaddress.kubernetes.io/managed-by"
REPAIR_INTERVAL = 180.0  # upstream's repair loops run every 3 minutes
LEAK_GRACE = 60.0  # upstream's RepairIPAddress grace period before an orphan IPAddress goes
_PICKS = 16  # values picked in a row that others took, before the hint is read afresh
_CHUNK = 256  # claims a repair hands the store at once

_Owner = tuple[str, str]  # the Service's (namespace, name)


def _ip_key(ip: str) -> bytes:
    return IP_PREFIX + ip.encode()


def _port_key(port: int) -> bytes:
    return PORT_PREFIX + str(port).encode()


Ranges = Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
DEFAULT_RANGES: Ranges = (SERVICE_CIDR,)


def _in_range(ip: str, ranges: Ranges) -> bool:
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return any(address in r and address not in (r.network_address, r.broadcast_address) for r in ranges)


def _node_port(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value in NODE_PORTS:
        return value
    return None


def held(svc: dict[str, Any] | None, ranges: Ranges = DEFAULT_RANGES) -> tuple[list[str], list[int]]:
    """The cluster IPs (of the ``ranges``) and node ports (of the range, the health check's
    too) a Service holds, each once."""
    spec = (svc or {}).get("spec")
    if not isinstance(spec, dict):
        return [], []
    ips: list[str] = []
    if spec.get("type") != "ExternalName":
        for ip in spec.get("clusterIPs") or ():
            if isinstance(ip, str) and ip not in ("", "None") and ip not in ips and _in_range(ip, ranges):
                ips.append(ip)
    ports: list[int] = []
    for p in (*(p.get("nodePort") for p in spec.get("ports") or () if isinstance(p, dict)),
              spec.get("healthCheckNodePort")):
        port = _node_port(p)
        if port is not None and port not in ports:
            ports.append(port)
    return ips, ports


def _now() -> str:
    return datetime.fromtimestamp(int(time.time()), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _claim_value(key: bytes, owner: _Owner) -> bytes:
    """The claim, shaped as upstream's IPAddress (the node port's alike)."""
    name = key.rsplit(b"/", 1)[1].decode()
    ref = {"group": "", "resource": "services", "namespace": owner[0], "name": owner[1]}
    meta: dict[str, Any] = {"name": name, "uid": new_uid(), "creationTimestamp": _now()}
    if key.startswith(IP_PREFIX):
        meta["labels"] = {"ipaddress.kubernetes.io/ip-family": "IPv6" if ":" in name else "IPv4",
                          MANAGED_BY_LABEL: MANAGED_BY}
        return orjson.dumps({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress", "metadata": meta,
                             "spec": {"parentRef": ref}})
    return orjson.dumps({"kind": "ServiceNodePort", "metadata": meta, "spec": {"parentRef": ref}})


def _owner(value: bytes) -> tuple[_Owner | None, float]:
    """The Service a claim names, and when the claim was made (epoch seconds; 0 unknown)."""
    try:
        obj = orjson.loads(value)
        ref = obj["spec"]["parentRef"]
        owner = (str(ref.get("namespace") or ""), str(ref["name"])) if ref.get("resource") == "services" \
            and not ref.get("group") else None
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None, 0.0
    try:
        made = datetime.fromisoformat(obj["metadata"]["creationTimestamp"]).timestamp()
    except (KeyError, TypeError, ValueError):
        made = 0.0
    return owner, made


def _managed(key: bytes, value: bytes) -> bool:
    """Whether the claim is the allocator's: every node port's; an IPAddress labelled
    ``managed-by: ipallocator.k8s.io`` (one made by hand is its maker's)."""
    if not key.startswith(IP_PREFIX):
        return True
    try:
        labels = orjson.loads(value)["metadata"].get("labels") or {}
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return False
    return isinstance(labels, dict) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY


@dataclass
class Hint:
    """What this process believes taken: where picks start, never what decides."""

    ips: set[str] = field(default_factory=set)
    ports: set[int] = field(default_factory=set)

    def add(self, key: bytes) -> None:
        self._set(key, True)

    def discard(self, key: bytes) -> None:
        self._set(key, False)

    def _set(self, key: bytes, taken: bool) -> None:
        if key.startswith(IP_PREFIX):
            ip = key[len(IP_PREFIX):].decode(errors="replace")
            (self.ips.add if taken else self.ips.discard)(ip)
        elif key[len(PORT_PREFIX):].isdigit():
            port = int(key[len(PORT_PREFIX):])
            (self.ports.add if taken else self.ports.discard)(port)


class ServiceWrite:
    """One write of a Service: the values its defaults pick (``SERVICE_PICKS``), then the
    claims of those it did not hold (``reserve``), taken back if the write fails (``abort``)."""

    def __init__(self, allocations: ServiceAllocations, before: tuple[list[str], list[int]]) -> None:
        self._allocations = allocations
        self._hint = allocations.hint
        self.before = before  # what the stored version held (taken before admission edits it)
        self.picked: set[bytes] = set()  # the keys of the values picked here (not asked for)
        self.claimed: list[tuple[bytes, int]] = []  # the claims this write made: (key, revision)
        self.refreshed = False  # whether this write read the hint afresh

    # -- the picks (registry.strategies.ServicePicks) -------------------------------
    def cluster_ip(self) -> str:
        ip = free_cluster_ip(self._hint.ips)
        self._hint.ips.add(ip)  # another write of this process picks another
        self.picked.add(_ip_key(ip))
        return ip

    def node_port(self, taken: set[int], hinted_only: bool = False) -> int | None:
        port = free_node_port(self._hint.ports.union(taken))
        if port is None and not hinted_only:  # full, as far as this process knows: the claim decides
            port = free_node_port(taken)
        if port is None:
            return None
        self._hint.ports.add(port)
        self.picked.add(_port_key(port))
        return port

    # -- the claims -----------------------------------------------------------------
    async def reserve(self, rtype: ResourceType, namespace: str, name: str, obj: dict[str, Any]) -> None:
        """Claim what ``obj`` holds and the stored version did not: a value picked here and
        taken meanwhile is picked again (in ``obj``), one asked for and taken is a 422.
        Raises with nothing of this write's left claimed."""
        ips, ports = self._allocations.held(obj)
        old_ips, old_ports = self.before
        wanted = [_ip_key(ip) for ip in ips if ip not in old_ips] + \
                 [_port_key(p) for p in ports if p not in old_ports]
        if not wanted:
            return
        owner = (namespace, name)
        try:
            misses = 0
            while wanted:
                # every claim settled before any failure is raised: the ones made are then taken back
                settled = await asyncio.gather(*(self._allocations.claim(key, owner) for key in wanted),
                                               return_exceptions=True)
                self.claimed += [(key, r) for key, r in zip(wanted, settled, strict=True)
                                 if isinstance(r, int) and r]
                failed = next((r for r in settled if isinstance(r, BaseException)), None)
                if failed is not None:
                    raise failed
                results = [r if isinstance(r, int) else None for r in settled]
                again: list[bytes] = []
                for key, revision in zip(wanted, results, strict=True):
                    if revision is None:  # another Service's
                        if key not in self.picked:
                            raise self._taken(rtype, name, obj, key)
                        if misses >= 4 * _PICKS:
                            raise ApiError(500, "InternalError", "Internal error occurred: failed to allocate "
                                           f"{'an IP' if key.startswith(IP_PREFIX) else 'a nodePort'}: "
                                           "other writes keep taking the values picked; try again")
                        misses += 1
                        if misses == _PICKS:  # the hint is far behind (other processes): read it afresh
                            await self._refresh()
                        again.append(await self._pick_again(obj, key))
                wanted = again
        except BaseException:
            await self.abort()
            raise

    def _taken(self, rtype: ResourceType, name: str, obj: dict[str, Any], key: bytes) -> ApiError:
        if key.startswith(IP_PREFIX):
            causes = [taken_ip_cause(obj, key[len(IP_PREFIX):].decode())]
        else:
            port = int(key[len(PORT_PREFIX):])
            causes = taken_port_causes(obj, port) or taken_health_check_port(obj, port)
        return ApiError.invalid(rtype, name, causes)

    async def _refresh(self) -> None:
        await self._allocations.refresh_hint()
        self.refreshed = True

    async def _pick_again(self, obj: dict[str, Any], key: bytes) -> bytes:
        """Another value for one picked here that another write took: put in ``obj``, its key."""
        spec = obj["spec"]
        self.picked.discard(key)
        if key.startswith(IP_PREFIX):
            was, ip = key[len(IP_PREFIX):].decode(), self.cluster_ip()
            if spec.get("clusterIP") == was:
                spec["clusterIP"] = ip
            spec["clusterIPs"] = [ip if v == was else v for v in spec.get("clusterIPs") or ()]
            return _ip_key(ip)
        was_port = int(key[len(PORT_PREFIX):])
        _, own = held(obj)
        port = self.node_port(set(own), hinted_only=True)
        if port is None and not self.refreshed:  # full, as far as this process knew
            await self._refresh()
            port = self.node_port(set(own), hinted_only=True)
        if port is None:  # as upstream's allocator answers a full range
            raise ApiError(500, "InternalError", "Internal error occurred: failed to allocate a nodePort: "
                                                 "range is full", {"causes": [{"message": "range is full"}]})
        for p in spec.get("ports") or ():
            if isinstance(p, dict) and p.get("nodePort") == was_port:
                p["nodePort"] = port
        if spec.get("healthCheckNodePort") == was_port:
            spec["healthCheckNodePort"] = port
        return _port_key(port)

    async def abort(self) -> None:
        """The write failed (or was a dry run): what it claimed and picked is free again."""
        claimed, self.claimed = self.claimed, []
        if claimed and not DRY_RUN.get():
            await self._allocations.unclaim(claimed)
        for key in self.picked:
            self._hint.discard(key)
        for key, _ in claimed:
            self._hint.discard(key)
        self.picked = set()

    async def done(self) -> None:
        """The write succeeded: its claims stay (a dry run's were never made)."""
        if DRY_RUN.get():
            await self.abort()
        self.picked, self.claimed = set(), []


class ServiceAllocations:
    """The claims of one API server process (see the module docstring)."""

    def __init__(self, get_store: Callable[[], Store], services: ResourceType) -> None:
        self._get_store = get_store  # the request's (a dry run's checks without writing)
        self.services = services
        self.hint = Hint()
        self.leak_grace = LEAK_GRACE
        # the Service ranges (the module docstring): all, and those a new IP may be asked from
        # (not of a ServiceCIDR being deleted)
        self.ranges: Ranges = DEFAULT_RANGES
        self.open_ranges: Ranges = DEFAULT_RANGES

    def held(self, svc: dict[str, Any] | None) -> tuple[list[str], list[int]]:
        """``held`` in the current ranges."""
        return held(svc, self.ranges)

    def ranges_from(self, service_cidrs: Iterable[bytes]) -> None:
        """The ranges: the default, and the CIDRs of these ServiceCIDRs (stored values)."""
        parsed = []
        for value in service_cidrs:
            with contextlib.suppress(orjson.JSONDecodeError):
                obj = orjson.loads(value)
                if isinstance(obj, dict):
                    parsed.append(obj)
        self.ranges = (SERVICE_CIDR, *(n for n in networks(parsed) if n != SERVICE_CIDR))
        self.open_ranges = (SERVICE_CIDR, *(n for n in networks(parsed, terminating=False) if n != SERVICE_CIDR))

    async def read_ranges(self) -> None:
        """The ranges as the store holds them now (a requested IP out of the known ranges
        may be in a ServiceCIDR this process has not heard of yet)."""
        st = self._get_store()
        kvs, _, _ = await st.range(CIDR_PREFIX, store.prefix_end(CIDR_PREFIX))
        self.ranges_from(kv.value for kv in kvs)

    def begin(self, old: dict[str, Any] | None) -> ServiceWrite:
        """A Service's write over ``old`` (None: a create) begins: its defaults pick through
        the ``ServiceWrite``."""
        write = ServiceWrite(self, self.held(old))
        SERVICE_PICKS.set(write)
        return write

    async def claim(self, key: bytes, owner: _Owner) -> int | None:
        """Create the claim: its revision; 0 when it is ``owner``'s already (rewritten, so that
        a repair deleting it as leaked fails); None when another Service's, or made by hand
        (an IPAddress without the allocator's label reserves its address, whatever it names)."""
        st = self._get_store()
        value = _claim_value(key, owner)
        for _ in range(8):
            try:
                revision = await st.create(key, value)
            except store.KeyExists:
                kv = await st.get(key)
                if kv is None:
                    continue  # released meanwhile
                if _owner(kv.value)[0] != owner or not _managed(key, kv.value):
                    self.hint.add(key)
                    return None
                try:
                    await st.update(key, value, kv.mod_revision)
                except (store.Conflict, store.NotFound):
                    continue
                self.hint.add(key)
                return 0
            self.hint.add(key)
            return revision
        return None

    async def claim_held(self, namespace: str, name: str, svc: dict[str, Any]) -> None:
        """Claim what a Service written without a ``ServiceWrite`` (the bootstrap's) holds."""
        ips, ports = self.held(svc)
        for key in [*map(_ip_key, ips), *map(_port_key, ports)]:
            if await self.claim(key, (namespace, name)) is None:
                log.warning("%s of service %s/%s is claimed by another service", key.decode(), namespace, name)

    async def unclaim(self, claims: Iterable[tuple[bytes, int]]) -> None:
        """Delete claims made at the revisions given (one since changed is another's)."""
        st = self._get_store()

        async def one(key: bytes, revision: int) -> None:
            with contextlib.suppress(store.NotFound, store.Conflict):
                await st.delete(key, revision)

        try:
            await asyncio.gather(*(one(key, revision) for key, revision in claims))
        except store.StoreError as e:  # the repair deletes what is left
            log.warning("could not release service allocations: %r", e)

    async def release(self, namespace: str, name: str, before: tuple[list[str], list[int]],
                      new: dict[str, Any] | None) -> None:
        """After a Service's write (``new`` None: its delete): free what it held ``before``
        (``held``) and ``new`` does not, where the claim names this Service. Never raises."""
        if DRY_RUN.get():
            return
        ips, ports = before
        new_ips, new_ports = self.held(new)
        keys = [_ip_key(ip) for ip in ips if ip not in new_ips] + \
               [_port_key(p) for p in ports if p not in new_ports]
        if not keys:
            return
        st = self._get_store()
        owner = (namespace, name)

        async def one(key: bytes) -> None:
            self.hint.discard(key)
            kv = await st.get(key)
            if kv is not None and _owner(kv.value)[0] == owner:
                with contextlib.suppress(store.NotFound, store.Conflict):
                    await st.delete(key, kv.mod_revision)

        try:
            await asyncio.gather(*(one(key) for key in keys))
        except store.StoreError as e:  # the repair deletes what is left
            log.warning("could not release the allocations of service %s/%s: %r", namespace, name, e)

    async def refresh_hint(self) -> None:
        """The hint read afresh: what is claimed now. (The picks of writes in flight here are
        forgotten: one picked again is a collision at its claim, and picked once more.)"""
        st = self._get_store()
        ips, revision, _ = await st.range(IP_PREFIX, store.prefix_end(IP_PREFIX))
        ports, _, _ = await st.range(PORT_PREFIX, store.prefix_end(PORT_PREFIX), revision)
        self._hint_from(kv.key for kv in ips + ports)

    def _hint_from(self, keys: Iterable[bytes]) -> None:
        hint = Hint()
        for key in keys:
            hint.add(key)
        self.hint.ips, self.hint.ports = hint.ips, hint.ports

    async def repair(self) -> dict[str, int]:
        """One pass of upstream's repair controllers: every value a Service holds is claimed
        (for it, unless another Service's claim holds it: that is logged, both Services
        keep it, as upstream's ``ClusterIPAlreadyAllocated``), and a claim no Service holds
        is deleted once older than ``leak_grace``. Then the hint is what is claimed.
        Returns the counts of what it did."""
        st = self._get_store()
        claims, revision, _ = await st.range(IP_PREFIX, store.prefix_end(IP_PREFIX))
        claims += (await st.range(PORT_PREFIX, store.prefix_end(PORT_PREFIX), revision))[0]
        cidrs, _, _ = await st.range(CIDR_PREFIX, store.prefix_end(CIDR_PREFIX), revision)
        self.ranges_from(kv.value for kv in cidrs)
        prefix = self.services.prefix(None)
        services, _, _ = await st.range(prefix, store.prefix_end(prefix), revision)
        holders: dict[bytes, list[_Owner]] = {}
        for kv in services:
            try:
                svc = orjson.loads(kv.value)
                meta = svc["metadata"]
                owner = (str(meta.get("namespace") or ""), str(meta["name"]))
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
            ips, ports = self.held(svc)
            for key in [*map(_ip_key, ips), *map(_port_key, ports)]:
                holders.setdefault(key, []).append(owner)
        now = time.time()
        claimed: dict[bytes, store.KeyValue] = {kv.key: kv for kv in claims}
        # what to write: (key, the claim for, the revision it expects: None to create, 0 to delete)
        work: list[tuple[bytes, _Owner | None, int | None]] = []
        duplicates = 0
        for key, owners in holders.items():
            if len(owners) > 1:
                duplicates += 1
                log.warning("%s was assigned to several services (%s); please recreate all but one",
                            key.decode(), ", ".join(f"{ns}/{n}" for ns, n in owners))
            if key not in claimed:  # upstream's "ClusterIPNotAllocated ... repairing"
                log.debug("%s of service %s/%s was not allocated; repairing", key.decode(), *owners[0])
                work.append((key, owners[0], None))
        for key, kv in claimed.items():
            named, made = _owner(kv.value)
            owners = holders.get(key, [])
            if named in owners or now - made < self.leak_grace or not _managed(key, kv.value):
                continue  # (a young claim may be a write in flight: its Service comes next)
            if owners:  # held, but the claim names another Service: it names the holder now
                work.append((key, owners[0], kv.mod_revision))
            else:
                log.info("%s appears to have leaked: cleaning up", key.decode())
                work.append((key, None, kv.mod_revision))

        async def fix(key: bytes, owner: _Owner | None, expected: int | None) -> None:
            with contextlib.suppress(store.KeyExists, store.Conflict, store.NotFound):
                if expected is None and owner is not None:
                    await st.create(key, _claim_value(key, owner))
                elif owner is not None and expected is not None:
                    await st.update(key, _claim_value(key, owner), expected)
                elif expected is not None:
                    await st.delete(key, expected)

        for at in range(0, len(work), _CHUNK):
            await asyncio.gather(*(fix(*w) for w in work[at:at + _CHUNK]))
        done = {"created": sum(1 for _, o, e in work if e is None),
                "repointed": sum(1 for _, o, e in work if o is not None and e is not None),
                "deleted": sum(1 for _, o, e in work if o is None), "duplicates": duplicates}
        if done["created"] or done["repointed"] or done["deleted"]:
            log.warning("service allocations repaired: %s", done)
        taken = set(holders) | {k for k, kv in claimed.items() if now - _owner(kv.value)[1] < self.leak_grace}
        self._hint_from(taken)
        return done

    async def run(self, interval: float = REPAIR_INTERVAL) -> None:
        """``repair`` every ``interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.repair()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the store unavailable a while: the next pass
                log.warning("service allocation repair failed: %r", e)
