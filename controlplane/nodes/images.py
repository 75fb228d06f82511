"""Image pulls: a per-node image cache and a model of how long a pull takes.

A pull downloads an image's layers in parallel (up to ``max_concurrent_downloads``,
containerd's default 3), all sharing the node's registry bandwidth, then
unpacks them (decompress and write the snapshot). Before containerd 2.2 the
unpack is serial, one layer after another; 2.2 unpacks layers in parallel
(``unpack_workers``). With 500 MB/s of bandwidth and 100 MB/s per unpack
worker, a 10 GB image in 20 layers takes 20 s + 100 s serially and
20 s + 25 s with four workers::

    >>> model = PullModel(bandwidth_mbps=500, unpack_mbps=100, unpack_workers=4)
    >>> round(model.pull_seconds(Image("big", [500.0] * 20)), 1)
    45.0

The kubelet pulls one image at a time per node by default
(``serializeImagePulls: true``); ``NodeImages`` keeps when the node's puller is
next free, so pods that need different images queue behind each other, and
pods that need an image being pulled wait for that pull.

Sizes come from an ``ImageCatalog``: exact names or prefixes (``nvcr.io/``) to
a size and layer count; an unknown image gets ``default_mb``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..metrics import IMAGE_PULL_SECONDS, IMAGE_PULLS

__all__ = ["Image", "ImageCatalog", "NodeImages", "Pull", "PullModel"]

@dataclass(frozen=True, slots=True)
class Image:
    name: str
    layers_mb: list[float]

    @property
    def size_mb(self) -> float:
        return sum(self.layers_mb)


def _layers(size_mb: float, count: int) -> list[float]:
    return [size_mb / count] * count


@dataclass
class ImageCatalog:
    """Image sizes. ``sizes`` maps a name or a prefix ending in ``/`` or ``:`` to (MB, layers)."""

    sizes: dict[str, tuple[float, int]] = field(default_factory=lambda: {
        "registry.k8s.io/pause": (0.7, 1),
        "busybox": (4.3, 1),
        "alpine": (7.8, 1),
        "nginx": (190.0, 7),
        "python": (1000.0, 8),
        "nvcr.io/": (10_000.0, 20),  # CUDA/PyTorch-sized images
    })
    default_mb: float = 100.0
    default_layers: int = 5

    def lookup(self, name: str) -> Image:
        repo = name.split("@", 1)[0]
        tagless = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
        for key in (name, repo, tagless):
            if key in self.sizes:
                mb, n = self.sizes[key]
                return Image(name, _layers(mb, n))
        for key, (mb, n) in self.sizes.items():
            if key.endswith(("/", ":")) and name.startswith(key):
                return Image(name, _layers(mb, n))
        return Image(name, _layers(self.default_mb, self.default_layers))


@dataclass(frozen=True, slots=True)
class PullModel:
    bandwidth_mbps: float = 125.0
    unpack_mbps: float = 100.0
    unpack_workers: int = 1
    max_concurrent_downloads: int = 3
    manifest_seconds: float = 0.05  # a registry round trip: what ``Always`` costs on a cached image

    def pull_seconds(self, image: Image) -> float:
        # The downloads share the bandwidth, so their total is size / bandwidth whatever
        # the parallelism, as long as it is enough to fill the pipe (it is, with 3).
        download = image.size_mb / self.bandwidth_mbps
        workers = max(1, self.unpack_workers)
        if workers == 1:
            unpack = image.size_mb / self.unpack_mbps
        else:  # largest layer first onto the least loaded worker
            loads = [0.0] * workers
            for mb in sorted(image.layers_mb, reverse=True):
                heapq.heapreplace(loads, loads[0] + mb / self.unpack_mbps)
            unpack = max(loads)
        return self.manifest_seconds + download + unpack


@dataclass(frozen=True, slots=True)
class Pull:
    """What ``NodeImages.pull`` found: when the image is usable (None: never, policy ``Never``
    and not on the node), and whether this container pulls it (``pulled``: not on the node yet,
    or policy ``Always``), the pull itself taking ``seconds`` of the ``ready - now`` the
    container waits (the rest: its turn behind other pulls). The kubelet's events say this:
    ``Pulling``/``Pulled`` for a pull, ``Pulled`` (already present) otherwise."""

    ready: float | None
    pulled: bool = False
    seconds: float = 0.0


class NodeImages:
    """One node's image store and puller. Times are on the caller's clock (monotonic seconds)."""

    __slots__ = ("_ready", "_puller_free", "model", "serialize")

    def __init__(self, model: PullModel, serialize: bool = True) -> None:
        self.model = model
        self.serialize = serialize
        self._ready: dict[str, float] = {}  # image -> when it is (or will be) usable
        self._puller_free = 0.0

    def has(self, name: str, now: float) -> bool:
        ready = self._ready.get(name)
        return ready is not None and ready <= now

    def ensure(self, image: Image, policy: str, now: float) -> float | None:
        """When ``image`` is usable on this node, starting a pull if needed (policy
        ``Always``/``IfNotPresent``/``Never``); None if it never will be (``Never``, not cached)."""
        return self.pull(image, policy, now).ready

    def pull(self, image: Image, policy: str, now: float) -> Pull:
        """``ensure``, saying how (``Pull``)."""
        ready = self._ready.get(image.name)
        if ready is not None:
            if ready > now:  # its pull is under way: this container's pull request waits for it
                IMAGE_PULLS.labels(result="joined").inc()
                return Pull(ready, True, ready - now)
            if policy != "Always":
                IMAGE_PULLS.labels(result="hit").inc()
                return Pull(now)
            IMAGE_PULLS.labels(result="hit").inc()  # layers cached: only the manifest is fetched
            return Pull(now + self.model.manifest_seconds, True, self.model.manifest_seconds)
        if policy == "Never":
            IMAGE_PULLS.labels(result="never").inc()
            return Pull(None)
        start = max(now, self._puller_free) if self.serialize else now
        seconds = self.model.pull_seconds(image)
        ready = start + seconds
        if self.serialize:
            self._puller_free = ready
        self._ready[image.name] = ready
        IMAGE_PULLS.labels(result="pull").inc()
        IMAGE_PULL_SECONDS.observe(seconds)
        return Pull(ready, True, seconds)

    def preload(self, name: str) -> None:
        """An image already on the node (a node image's baked-in content)."""
        self._ready[name] = 0.0

    def images(self, now: float) -> list[str]:
        return sorted(n for n, t in self._ready.items() if t <= now)
