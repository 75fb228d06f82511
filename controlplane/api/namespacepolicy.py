"""The namespaced Roles and RoleBindings of upstream's bootstrap policy (its
``namespace_policy.go``): in ``kube-system``, who reads the front proxy's client CA
(``extension-apiserver-authentication``), the schedulers' and controller managers' leader
election, and the bootstrap token controllers; in ``kube-public``, the bootstrap signer's
``cluster-info``. Labelled, annotated and sorted as ``rbacpolicy.py``'s ClusterRoles.
"""

from __future__ import annotations

from typing import Any

from .rbacpolicy import COORDINATION, CORE, EVENTS, READ, bootstrap_binding, bootstrap_role, rule, service_account, user

__all__ = ["NAMESPACE_ROLES", "NAMESPACE_ROLE_BINDINGS"]

Obj = dict[str, Any]
SYSTEM, PUBLIC = "kube-system", "kube-public"
LEADER_ELECTION = "create get list update watch"


def _role(namespace: str, name: str, rules: list[Obj]) -> Obj:
    return bootstrap_role(name, rules, kind="Role", namespace=namespace)


def _binding(namespace: str, name: str, subjects: list[Obj], role: str | None = None) -> Obj:
    return bootstrap_binding(name, subjects, role, kind="RoleBinding", namespace=namespace)


NAMESPACE_ROLES: tuple[Obj, ...] = (
    _role(PUBLIC, "system:controller:bootstrap-signer", [
        rule(READ, CORE, "configmaps"),
        rule("update", CORE, "configmaps", names="cluster-info"),
        EVENTS,
    ]),
    _role(SYSTEM, "extension-apiserver-authentication-reader", [
        rule(READ, CORE, "configmaps", names="extension-apiserver-authentication"),
    ]),
    *(_role(SYSTEM, f"system::leader-locking-{component}", [
        rule(LEADER_ELECTION, COORDINATION, "leases"),
        rule(LEADER_ELECTION, COORDINATION, "leasecandidates"),
    ]) for component in ("kube-controller-manager", "kube-scheduler")),
    _role(SYSTEM, "system:controller:bootstrap-signer", [rule(READ, CORE, "secrets")]),
    _role(SYSTEM, "system:controller:cloud-provider", [rule("create get list watch", CORE, "configmaps")]),
    _role(SYSTEM, "system:controller:token-cleaner", [rule("delete get list watch", CORE, "secrets"), EVENTS]),
)

NAMESPACE_ROLE_BINDINGS: tuple[Obj, ...] = (
    _binding(PUBLIC, "system:controller:bootstrap-signer", [service_account("bootstrap-signer")]),
    _binding(SYSTEM, "system::extension-apiserver-authentication-reader",
             [user("system:kube-controller-manager"), user("system:kube-scheduler")],
             "extension-apiserver-authentication-reader"),
    _binding(SYSTEM, "system::leader-locking-kube-controller-manager",
             [user("system:kube-controller-manager"), service_account("kube-controller-manager"),
              service_account("leader-election-controller")]),
    _binding(SYSTEM, "system::leader-locking-kube-scheduler",
             [user("system:kube-scheduler"), service_account("kube-scheduler")]),
    _binding(SYSTEM, "system:controller:bootstrap-signer", [service_account("bootstrap-signer")]),
    _binding(SYSTEM, "system:controller:cloud-provider", [service_account("cloud-provider")]),
    _binding(SYSTEM, "system:controller:token-cleaner", [service_account("token-cleaner")]),
)
