"""Pod and node addresses.

Each simulated node gets a pod CIDR (``spec.podCIDR``) carved from the cluster
CIDR, as the node IPAM controller does, and an ``InternalIP`` from the node
network. A pod's IP comes from its node's CIDR; ``release`` returns it when
the pod goes. Per node the state is two ints and a small free list: 100,000
nodes cost a few megabytes.

    >>> cidrs = CidrAllocator("10.0.0.0/8", mask=24)
    >>> cidrs.allocate()
    '10.0.0.0/24'
    >>> pool = PodIPs("10.0.0.0/24")
    >>> pool.allocate(), pool.allocate()
    ('10.0.0.1', '10.0.0.2')
"""

from __future__ import annotations

import heapq
import ipaddress

__all__ = ["CidrAllocator", "IPExhausted", "PodIPs", "node_cidr_mask"]


class IPExhausted(RuntimeError):
    pass


def node_cidr_mask(cluster_cidr: str, nodes: int, max_pods: int = 110) -> int:
    """The longest per-node mask that still gives ``nodes`` subnets of the cluster CIDR,
    but no longer than what ``max_pods`` addresses need (/24 for 110 pods, as upstream)."""
    net = ipaddress.ip_network(cluster_cidr)
    need_bits = max(1, (max(nodes, 1) - 1).bit_length())
    fit = net.max_prefixlen - max(1, (max_pods + 1).bit_length())
    return max(min(24, fit), net.prefixlen + need_bits) if net.version == 4 else net.prefixlen + need_bits


class CidrAllocator:
    """Subnets of ``cidr`` with prefix length ``mask``, handed out in order, reused after release."""

    def __init__(self, cidr: str, mask: int) -> None:
        self.net = ipaddress.ip_network(cidr)
        if mask < self.net.prefixlen or mask > self.net.max_prefixlen:
            raise ValueError(f"mask /{mask} does not fit in {cidr}")
        self.mask = mask
        self._size = 1 << (self.net.max_prefixlen - mask)
        self._count = 1 << (mask - self.net.prefixlen)
        self._next = 0
        self._free: list[int] = []
        self._used: set[int] = set()

    def _subnet(self, index: int) -> str:
        base = int(self.net.network_address) + index * self._size
        return f"{ipaddress.ip_address(base)}/{self.mask}"

    def _index(self, cidr: str) -> int | None:
        sub = ipaddress.ip_network(cidr, strict=False)
        if sub.prefixlen != self.mask or not sub.subnet_of(self.net):  # type: ignore[arg-type]
            return None
        return (int(sub.network_address) - int(self.net.network_address)) // self._size

    def allocate(self) -> str:
        while self._free:
            index = self._free.pop()
            if index not in self._used:
                self._used.add(index)
                return self._subnet(index)
        while self._next < self._count:
            index, self._next = self._next, self._next + 1
            if index not in self._used:
                self._used.add(index)
                return self._subnet(index)
        raise IPExhausted(f"no /{self.mask} left in {self.net}")

    def occupy(self, cidr: str) -> None:
        """Mark a CIDR another allocator gave out (an adopted node's) as used."""
        index = self._index(cidr)
        if index is not None:
            self._used.add(index)

    def release(self, cidr: str) -> None:
        index = self._index(cidr)
        if index is not None and index in self._used:
            self._used.discard(index)
            self._free.append(index)


class PodIPs:
    """The addresses of one node's pod CIDR: the network address and (IPv4) broadcast
    are skipped, the rest given out lowest free first (released ones are reused)."""

    __slots__ = ("_base", "_free", "_next", "_last", "_used", "version")

    def __init__(self, cidr: str) -> None:
        net = ipaddress.ip_network(cidr, strict=False)
        self.version = net.version
        self._base = int(net.network_address)
        self._next = 1
        self._last = net.num_addresses - (2 if net.version == 4 else 1)
        # made on first use: an empty list or set is still an object the cyclic GC walks
        # at every full collection, two a node at 100,000 nodes that never run a pod
        self._free: list[int] | None = None  # released offsets below _next, a heap
        self._used: set[int] | None = None

    def allocate(self) -> str:
        if self._free:
            offset = heapq.heappop(self._free)
        elif self._next <= self._last:
            offset, self._next = self._next, self._next + 1
        else:
            raise IPExhausted("the node's pod CIDR is full")
        self._in_use().add(offset)
        return str(ipaddress.ip_address(self._base + offset))

    def occupy(self, ip: str) -> bool:
        """Mark ``ip`` as used (a running pod found at start); False if it is not in the CIDR."""
        offset = int(ipaddress.ip_address(ip)) - self._base
        if not 1 <= offset <= self._last:
            return False
        self._in_use().add(offset)
        if offset >= self._next:
            free = self._released()
            for o in range(self._next, offset):
                heapq.heappush(free, o)
            self._next = offset + 1
        elif self._free and offset in self._free:
            self._free.remove(offset)
            heapq.heapify(self._free)
        return True

    def release(self, ip: str) -> None:
        offset = int(ipaddress.ip_address(ip)) - self._base
        if self._used and offset in self._used:
            self._used.discard(offset)
            heapq.heappush(self._released(), offset)

    def _in_use(self) -> set[int]:
        if self._used is None:
            self._used = set()
        return self._used

    def _released(self) -> list[int]:
        if self._free is None:
            self._free = []
        return self._free

    def __len__(self) -> int:
        return len(self._used) if self._used else 0
