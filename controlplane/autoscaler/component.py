"""The autoscaler as a component of ``controlplane serve``.

Off by default. ``--autoscaler`` starts it with the server (and installs the
karpenter.sh CRDs); without the flag it starts only if a NodePool is already
stored when the server starts (a restart of a cluster that had one), which
costs one list call. A NodePool created later in a server started without
the flag starts nothing: use the flag, or run ``controlplane autoscaler``
beside the server. ``--instance-types FILE`` replaces the catalog.
"""

from __future__ import annotations

import logging

from ..client import ApiError, Client, resource_path
from ..config import Config
from .crds import GROUP, NODEPOOLS, VERSION

__all__ = ["nodepool_exists", "start"]

log = logging.getLogger(__name__)


async def nodepool_exists(client: Client) -> bool:
    """Whether a NodePool is stored (one list call): the autoscaler then starts without the flag."""
    try:
        page = await client.list(resource_path(GROUP, VERSION, NODEPOOLS), limit=1)
    except ApiError:
        return False  # the CRD is not installed
    return bool(page.get("items"))


async def start(client: Client, config: Config) -> None:
    if not config.autoscaler:
        if not await nodepool_exists(client):
            return
        log.info("autoscaler: a NodePool is stored; starting")
    from .catalog import Catalog, load
    from .controller import Autoscaler

    path = config.instance_types
    catalog = load(path) if path is not None else Catalog.default()
    await Autoscaler(client, catalog).run()
