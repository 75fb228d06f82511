"""kube-controller-manager's ``csrapproving`` controller: a kubelet's client certificate
request approved when its requestor may ask for one, as upstream's ``sarApprover``.

A pending CertificateSigningRequest (no certificate, neither Approved nor Denied) for
``kubernetes.io/kube-apiserver-client-kubelet`` that is a kubelet client request (the
signer's own checks pass: ``controllers/certificates.py``'s ``refusal``) is approved,
reason ``AutoApproved``, when a SubjectAccessReview for its requestor (the spec's user,
uid, groups and extra, which the API server wrote) allows ``create`` on
``certificatesigningrequests/selfnodeclient`` (the request is for the requestor's own
name: its common name is the username) or else ``certificatesigningrequests/nodeclient``
(a bootstrap token renewing nothing yet). Upstream's bootstrap roles
``system:certificates.k8s.io:certificatesigningrequests:nodeclient`` and
``:selfnodeclient`` grant those (``api/rbacpolicy.py``). Any other request is left for a
human (``kubectl certificate approve``); a kubelet client request whose review does not
allow is asked about again after a delay doubling up to a minute (upstream's rate-limited
requeue), so a grant bound after the request still approves it. Under ``--authorization-mode AlwaysAllow`` every
review allows, so every kubelet client request is approved, as upstream's.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from controlplane.client import ApiError, Client
from controlplane.client.workqueue import NotDone, WorkQueue, run_controller
from controlplane.registry.certificates import parse_request

from .certificates import CSRS, KUBELET_CLIENT, refusal
from .ownership import meta_of

if TYPE_CHECKING:
    from controlplane.config import Config

__all__ = ["CsrApprover", "start"]

REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
# (subresource, the condition's message), in upstream's order: the self one first
RECOGNIZERS = (("selfnodeclient", "Auto approving self kubelet client certificate after SubjectAccessReview."),
               ("nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview."))


def _pending(csr: dict[str, Any]) -> bool:
    status = csr.get("status") or {}
    kinds = {c.get("type") for c in status.get("conditions") or () if isinstance(c, dict)}
    return not status.get("certificate") and not kinds & {"Approved", "Denied"}


def recognized(csr: dict[str, Any]) -> list[tuple[str, str]]:
    """The recognizers (subresource, message) that take ``csr``, in the order they are tried."""
    spec = csr.get("spec") or {}
    if spec.get("signerName") != KUBELET_CLIENT:
        return []
    request, _ = parse_request(spec.get("request"))
    if request is None or refusal(KUBELET_CLIENT, request, list(spec.get("usages") or ())):
        return []
    from cryptography.x509.oid import NameOID

    common = [a.value for a in request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    own = bool(common) and spec.get("username") == common[0]
    return [r for r in RECOGNIZERS if own or r[0] != "selfnodeclient"]


class CsrApprover:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.queue = WorkQueue()
        self.csrs = client.informer(CSRS, on_add=self._changed, on_update=lambda _old, new: self._changed(new))

    def _changed(self, csr: dict[str, Any]) -> None:
        if _pending(csr):
            self.queue.add(str(meta_of(csr).get("name", "")))

    async def run(self) -> None:
        await run_controller("csr approver", (self.csrs,), self.queue, self.sync, 1)

    async def _allowed(self, csr: dict[str, Any], subresource: str) -> bool:
        spec = csr.get("spec") or {}
        review_spec: dict[str, Any] = {"user": spec.get("username") or "", "groups": list(spec.get("groups") or ()),
                                       "resourceAttributes": {"group": "certificates.k8s.io", "verb": "create",
                                                              "resource": "certificatesigningrequests",
                                                              "subresource": subresource}}
        if spec.get("uid"):
            review_spec["uid"] = spec["uid"]
        if spec.get("extra"):
            review_spec["extra"] = spec["extra"]
        answer = await self.client.create(REVIEWS, {"apiVersion": "authorization.k8s.io/v1",
                                                    "kind": "SubjectAccessReview", "spec": review_spec})
        return bool((answer.get("status") or {}).get("allowed"))

    async def sync(self, name: str) -> None:
        csr = self.csrs.items.get(name)
        if csr is None or not _pending(csr):
            return
        tried = recognized(csr)
        for subresource, message in tried:
            if await self._allowed(csr, subresource):
                now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                status = dict(csr.get("status") or {})
                status["conditions"] = [*(status.get("conditions") or ()), {
                    "type": "Approved", "status": "True", "reason": "AutoApproved", "message": message,
                    "lastUpdateTime": now, "lastTransitionTime": now}]
                try:
                    await self.client.update(f"{CSRS}/{name}/approval", {**csr, "status": status})
                except ApiError as e:
                    if e.code not in (404, 409):  # gone, or changed meanwhile: its event comes back
                        raise
                return
        if tried:  # asked again later, as upstream's requeue: a grant may come after the request
            raise NotApproved(f"recognized csr {name!r} as {[t[0] for t in tried]} but subject access review "
                              "was not approved")


class NotApproved(NotDone):
    """A kubelet client request its requestor may not (yet) have approved: its key is handled
    again after a growing delay (``run_controller``), logged in a line."""


async def start(client: Client, config: Config) -> None:
    """The component entry point (``controlplane/components.py``)."""
    await CsrApprover(client).run()
