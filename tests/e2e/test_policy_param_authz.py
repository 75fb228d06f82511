"""Who may point an admission policy at its parameters (api/paramauthz.py), over a socket
with the real kubectl and ``--authorization-mode RBAC``: upstream's 422 ``Forbidden`` causes
of a policy's ``paramKind`` and a binding's ``paramRef`` its writer may not read."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import KUBECTL, kubectl
from tests.e2e.test_policy_params import created, eventually, refused
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("paramauthz"), extra=("--authorization-mode", "RBAC"))) as s:
        yield s


CONFIGMAP_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: NAME}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [services]}
  validations:
  - expression: "true"
"""

CONFIGMAP_BINDING = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: NAME}
spec:
  policyName: POLICY
  paramRef: REF
  validationActions: [Deny]
"""


def test_a_policys_params_need_their_writer_to_read_them(served: Serve) -> None:
    """upstream's authz.go of the policy and binding strategies: a paramKind needs ``get`` on every
    object of its kind, a binding's paramRef ``get`` of the named param (``list`` for a selector),
    each a 422 ``Forbidden`` cause naming the user as Go prints it; the masters are never asked."""
    kubectl(served, "create", "clusterrole", "policy-writer", "--verb=create,get,update",
            "--resource=validatingadmissionpolicies.admissionregistration.k8s.io,"
            "validatingadmissionpolicybindings.admissionregistration.k8s.io")
    for user in ("alice", "bob"):
        kubectl(served, "create", "clusterrolebinding", f"{user}-policy-writer", "--clusterrole=policy-writer",
                f"--user={user}")
    policy = CONFIGMAP_POLICY.replace("NAME", "cm-policy")
    err = refused(served, "create", "-f", "-", "--as", "alice", stdin=policy)
    assert ('The ValidatingAdmissionPolicy "cm-policy" is invalid: spec.paramKind: Forbidden: user '
            '&{alice  [system:authenticated] map[]} must have "get" permission on all objects of the referenced '
            "paramKind (kind=ConfigMap, apiVersion=v1)") in err, err
    kubectl(served, "create", "clusterrole", "configmap-reader", "--verb=get,list", "--resource=configmaps")
    kubectl(served, "create", "clusterrolebinding", "alice-reads", "--clusterrole=configmap-reader", "--user=alice")
    eventually(lambda: created_as(served, "alice", policy), "alice, who reads every ConfigMap, may")
    # a binding: bob reads no ConfigMap, alice reads them all; the masters need nothing
    def binding(name: str, policy_name: str, ref: str) -> str:
        return CONFIGMAP_BINDING.replace("NAME", name).replace("POLICY", policy_name).replace("REF", ref)

    ref = "{name: limits, namespace: default, parameterNotFoundAction: Allow}"
    named = binding("cm-binding", "cm-policy", ref)
    err = refused(served, "create", "-f", "-", "--as", "bob", stdin=named)
    assert ('The ValidatingAdmissionPolicyBinding "cm-binding" is invalid: spec.paramRef: Forbidden: user '
            '&{bob  [system:authenticated] map[]} does not have "get" permission on the object referenced by '
            "paramRef") in err, err
    selected = binding("cm-selected", "cm-policy", "{selector: {}, namespace: default, parameterNotFoundAction: Allow}")
    err = refused(served, "create", "-f", "-", "--as", "bob", stdin=selected)
    assert 'does not have "list" permission on the object referenced by paramRef' in err, err
    orphan = binding("cm-orphan", "no-such-policy", ref)
    err = refused(served, "create", "-f", "-", "--as", "bob", stdin=orphan)
    assert ('spec.paramRef: Forbidden: unable to get policy no-such-policy to determine minimum required permissions '
            'and user &{bob  [system:authenticated] map[]} does not have "get" permission for all groups, versions '
            "and resources") in err, err
    kubectl(served, "create", "role", "limits-reader", "-n", "default", "--verb=get", "--resource=configmaps",
            "--resource-name=limits")
    kubectl(served, "create", "rolebinding", "bob-reads-limits", "-n", "default", "--role=limits-reader", "--user=bob")
    eventually(lambda: created_as(served, "bob", named), "bob, who reads that one ConfigMap, may bind it")
    assert created_as(served, "alice", selected)
    assert created(served, orphan)  # the admin (system:masters) is never asked


def created_as(served: Serve, user: str, stdin: str) -> bool:
    """Whether ``kubectl create --as USER`` of ``stdin`` succeeds."""
    assert KUBECTL
    env = dict(os.environ, KUBECONFIG=str(served.kubeconfig), HOME=str(served.state))
    r = subprocess.run([KUBECTL, "create", "--as", user, "-f", "-"], input=stdin, capture_output=True, text=True,
                       env=env, timeout=60)
    return r.returncode == 0


def test_the_user_is_named_as_go_prints_it() -> None:
    from controlplane.api.paramauthz import go_user
    from controlplane.api.rbac import User

    sa = User("system:serviceaccount:ns:sa", ("system:serviceaccounts", "system:authenticated"), "6f1c",
              (("authentication.kubernetes.io/credential-id", ("JTI=1",)), ("b", ("x", "y"))))
    assert go_user(sa) == ("&{system:serviceaccount:ns:sa 6f1c [system:serviceaccounts system:authenticated] "
                           "map[authentication.kubernetes.io/credential-id:[JTI=1] b:[x y]]}")
    assert go_user(User("alice")) == "&{alice  [] map[]}"
