"""Who the built-in components are: upstream's identities, with credentials made at start.

A kubeadm cluster shows in its audit log, and tells its authorizers, who sends each request:
the scheduler is the user ``system:kube-scheduler``; kube-controller-manager, run with
``--use-service-account-credentials`` (kubeadm's default), is each controller's own service
account in ``kube-system`` (``system:serviceaccount:kube-system:replicaset-controller``, the
names its ``ClientBuilder.ClientOrDie(...)`` calls give), and ``system:kube-controller-manager``
for its shared informers and its leader election; a kubelet is ``system:node:<node>`` in the
group ``system:nodes``; kube-apiserver's own controllers are its loopback user
``system:apiserver`` (group ``system:masters``); Karpenter is its service account. The
components of ``controlplane serve`` present the same identities (``IDENTITIES`` below names
the choices that are not upstream's: the node simulator's own writes and its bulk requests are
KWOK's controller's service account, ``kwok-controller``).

Their credentials are bearer tokens ``controlplane-identity/<user name>/<MAC>``: the MAC is
a keyed BLAKE2b of the user name with a key derived from the server's admin token
(``identity_key``), so every server process of a port (``--workers``) and the components'
process (``--components-process``), which all read that token, make and check the same
tokens, and nobody without the admin's token can make one (and whoever has it is allowed
everything already). They are never written to the token file. The user name gives the
groups (``user_of``): nothing is looked up, and a kubelet's token costs no entry anywhere for
its node. ``Identities.static_tokens`` lists the fixed ones (not the kubelets') for the
authenticator's token dict, where they cost what a token file's line costs.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .tokens import MASTERS_GROUP, TokenEntry

if TYPE_CHECKING:
    from .client import Client

__all__ = [
    "API_SERVER",
    "AUTHENTICATED",
    "CONTROLLER_MANAGER",
    "KUBE_SYSTEM_SERVICE_ACCOUNTS",
    "NODES_GROUP",
    "NODE_PREFIX",
    "SCHEDULER",
    "SERVICE_ACCOUNT_PREFIX",
    "TOKEN_PREFIX",
    "Identities",
    "admin_tokens",
    "ensure_service_accounts",
    "groups_of",
    "identity_key",
    "node_of",
    "node_user",
    "service_account_user",
]

log = logging.getLogger(__name__)

TOKEN_PREFIX = "controlplane-identity/"
AUTHENTICATED = "system:authenticated"
SCHEDULER = "system:kube-scheduler"
CONTROLLER_MANAGER = "system:kube-controller-manager"
API_SERVER = "system:apiserver"  # kube-apiserver's loopback client: its own controllers
NODE_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:kube-system:"
_SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", AUTHENTICATED)
_NODE_GROUPS = (NODES_GROUP, AUTHENTICATED)

# the service accounts of kube-system the components act as: kube-controller-manager's controllers
# (the names its ClientOrDie calls give, which its system:controller:* roles are bound to), Karpenter's,
# KWOK's controller's (the node simulator's own writes and its bulk renewals and status reports)
KUBE_SYSTEM_SERVICE_ACCOUNTS = (
    "certificate-controller", "clusterrole-aggregation-controller", "cronjob-controller", "daemon-set-controller",
    "deployment-controller", "device-taint-eviction-controller", "disruption-controller", "endpoint-controller",
    "endpointslice-controller", "generic-garbage-collector", "horizontal-pod-autoscaler", "job-controller",
    "node-controller", "persistent-volume-binder", "pod-garbage-collector", "podgroup-protection-controller",
    "pv-protection-controller", "pvc-protection-controller", "replicaset-controller", "replication-controller",
    "resource-claim-controller",
    "resourcequota-controller", "root-ca-cert-publisher", "service-account-controller", "service-cidrs-controller",
    "statefulset-controller", "storage-version-migrator-controller", "ttl-after-finished-controller",
    "karpenter", "kwok-controller",
)


def service_account_user(name: str) -> str:
    """The user name of the service account ``kube-system/<name>``."""
    return SERVICE_ACCOUNT_PREFIX + name


def node_user(node: str) -> str:
    """The user name of ``node``'s kubelet."""
    return NODE_PREFIX + node


def node_of(user: str) -> str | None:
    """The node whose kubelet ``user`` is, or None."""
    return user[len(NODE_PREFIX):] if user.startswith(NODE_PREFIX) else None


def groups_of(user: str) -> tuple[str, ...] | None:
    """The groups upstream's authenticators give ``user``, when it is one of the identities
    here; None otherwise (a token naming any other user authenticates nobody)."""
    if user.startswith(NODE_PREFIX):
        return _NODE_GROUPS if len(user) > len(NODE_PREFIX) else None
    if user.startswith(SERVICE_ACCOUNT_PREFIX):
        return _SA_GROUPS if user[len(SERVICE_ACCOUNT_PREFIX):] in _ACCOUNTS else None
    if user in (SCHEDULER, CONTROLLER_MANAGER):
        return (AUTHENTICATED,)
    if user == API_SERVER:
        return (MASTERS_GROUP, AUTHENTICATED)
    return None


_ACCOUNTS = frozenset(KUBE_SYSTEM_SERVICE_ACCOUNTS)


def identity_key(admin_tokens: Iterable[str]) -> bytes | None:
    """The key the identities' tokens are signed with: derived from the first admin token of the
    token file (the one in the admin's kubeconfig), so every process that reads either has it;
    None without one (the components then present no token, as before a token file exists)."""
    for token in admin_tokens:
        return hmac.digest(token.encode(), b"controlplane component identities v1", "sha256")
    return None


def admin_tokens(entries: Iterable[TokenEntry]) -> list[str]:
    """The token file's tokens the server treats as its admin's: those of ``system:masters``
    members, else every one (``app.py`` gives the components the first)."""
    entries = list(entries)
    return [e.token for e in entries if MASTERS_GROUP in e.groups] or [e.token for e in entries]


class Identities:
    """Makes and checks the identities' tokens with one key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, user: str) -> str:
        # keyed BLAKE2b, a MAC by design: a third of HMAC-SHA256's time (a kubelet's every request is checked)
        return hashlib.blake2b(user.encode(), key=self._key, digest_size=32).hexdigest()

    def token(self, user: str) -> str:
        """``user``'s bearer token; ``user`` must be one of the identities (``groups_of``)."""
        if groups_of(user) is None:
            raise ValueError(f"{user!r} is not an identity of the built-in components")
        return f"{TOKEN_PREFIX}{user}/{self._mac(user)}"

    def user_of(self, token: str) -> tuple[str, tuple[str, ...]] | None:
        """The user name and groups ``token`` authenticates, or None (not one of ours, or forged)."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        user, _, mac = token[len(TOKEN_PREFIX):].rpartition("/")
        groups = groups_of(user)
        if groups is None or not hmac.compare_digest(mac, self._mac(user)):
            return None
        return user, groups

    def static_tokens(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """token -> (user, groups) of every identity but the kubelets' (one per node)."""
        users = [SCHEDULER, CONTROLLER_MANAGER, API_SERVER, *map(service_account_user, KUBE_SYSTEM_SERVICE_ACCOUNTS)]
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        for user in users:
            groups = groups_of(user)
            assert groups is not None
            out[self.token(user)] = (user, groups)
        return out


async def ensure_service_accounts(client: Client, names: Iterable[str] = KUBE_SYSTEM_SERVICE_ACCOUNTS) -> None:
    """The service accounts ``kube-system/<name>`` created where missing, as kube-controller-manager's
    client builder creates its controllers' before their first request (as itself: its role
    allows it), and as Karpenter's and KWOK's manifests create theirs. An API that refuses
    (a server that is not this one, another authorizer) is logged, not fatal: the components
    authenticate without them."""
    from .client import ApiError

    path = "/api/v1/namespaces/kube-system/serviceaccounts"
    for name in names:
        try:
            await client.create(path, {"apiVersion": "v1", "kind": "ServiceAccount",
                                       "metadata": {"name": name, "namespace": "kube-system"}})
        except ApiError as e:
            if e.code != 409:
                log.warning("cannot create the service account kube-system/%s: %s", name, e)
                return
