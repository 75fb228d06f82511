"""kubectl commands a third sweep against upstream found answered differently, with the real
kubectl against one ``controlplane serve`` (its controllers and scheduler, no nodes) over a
socket: ``kubectl create quota`` of hard limits its scopes do not apply to, of names that are
no quota resource, of counts that are not whole, of opposite scopes, and a change of scopes
(``ValidateResourceQuota`` and ``ValidateResourceQuotaUpdate``, registry/quota.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.test_kubectl import kubectl
from tests.e2e.test_kubectl_sweep import failing
from tests.test_cli import Serve, running, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with running(start_serve(tmp_path_factory.mktemp("sweep3"), scheduler=True)) as s:
        yield s


def test_a_quota_is_refused_for_resources_its_scopes_do_not_apply_to(served: Serve) -> None:
    """BestEffort pods request nothing, so such a quota may count pods only; the other pod
    scopes pods and their cpu and memory. The error names the scopes as Go prints them, once
    however many resources it applies to (kube-apiserver's message is its aggregate)."""
    err = failing(served, "create", "quota", "be", "--hard=cpu=1,memory=1G,pods=10", "--scopes=BestEffort")
    assert err.strip() == ('error: failed to create quota: ResourceQuota "be" is invalid: spec.scopes: Invalid '
                           'value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to resource')
    err = failing(served, "create", "quota", "term", "--hard=requests.storage=1Gi,count/deployments.apps=2",
                  "--scopes=Terminating")
    assert err.strip().endswith('spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating"}: '
                                "unsupported scope applied to resource")
    # what a scope applies to: pods (and, but for BestEffort, their compute); anything not
    # a standard resource is not checked
    assert "created" in kubectl(served, "create", "quota", "be", "--hard=pods=10,example.com/gpu=2",
                                "--scopes=BestEffort")
    assert "created" in kubectl(served, "create", "quota", "nt", "--hard=pods=3,requests.cpu=1,limits.memory=1Gi",
                                "--scopes=NotTerminating")


def test_a_quota_names_standard_resources_in_whole_counts_and_no_opposite_scopes(served: Serve) -> None:
    err = failing(served, "create", "quota", "odd", "--hard=foo=1")
    assert err.strip() == ('error: failed to create quota: ResourceQuota "odd" is invalid: ['
                           'spec.hard[foo]: Invalid value: "foo": must be a standard resource type or fully '
                           'qualified, spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota]')
    err = failing(served, "create", "quota", "half", "--hard=pods=1.5")
    assert err.strip().endswith(": must be an integer")
    assert "spec.hard[pods]: Invalid value: " in err
    err = failing(served, "create", "quota", "both", "--hard=pods=1", "--scopes=BestEffort,NotBestEffort")
    assert err.strip().endswith('spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort", '
                                '"NotBestEffort"}: conflicting scopes')
    err = failing(served, "create", "quota", "made-up", "--hard=pods=1", "--scopes=Someday")
    assert err.strip().endswith('spec.scopes: Invalid value: []core.ResourceQuotaScope{"Someday"}: unsupported scope')


def test_a_quotas_scopes_do_not_change_and_its_selector_is_checked(served: Serve) -> None:
    """Its hard limits may change, its scopes not; the quota controller's status writes go on."""
    kubectl(served, "create", "quota", "fixed", "--hard=pods=1,cpu=1", "--scopes=NotTerminating")
    err = failing(served, "patch", "quota", "fixed", "--type=merge", "-p", '{"spec":{"scopes":["Terminating"]}}')
    assert err.strip() == ('The ResourceQuota "fixed" is invalid: spec.scopes: Invalid value: '
                           '[]core.ResourceQuotaScope{"Terminating"}: field is immutable')
    kubectl(served, "patch", "quota", "fixed", "--type=merge", "-p", '{"spec":{"hard":{"pods":"3"}}}')
    assert kubectl(served, "wait", "quota/fixed", "--for=jsonpath={.status.hard.pods}=3", "--timeout=30s")
    manifest = """
apiVersion: v1
kind: ResourceQuota
metadata: {name: picky}
spec:
  hard: {pods: "5"}
  scopeSelector:
    matchExpressions:
    - {scopeName: BestEffort, operator: In, values: [x]}
    - {scopeName: PriorityClass, operator: Exists, values: [high]}
"""
    err = failing(served, "apply", "-f", "-", stdin=manifest)
    at = "spec.scopeSelector.matchExpressions"
    assert f"{at}.operator: Invalid value: \"In\": must be 'Exists' when scope is any of " in err
    assert f"{at}.values: Invalid value: []string{{\"high\"}}: must be no value when `operator` is 'Exist' or " \
           "'DoesNotExist' for scope selector" in err


def test_a_second_global_default_priority_class_is_forbidden(served: Serve) -> None:
    """Priority admission: while one class is the global default, another may not be made one,
    at its create or by an update; the default itself may be updated."""
    kubectl(served, "create", "priorityclass", "usual", "--value=10", "--global-default")
    why = "is forbidden: PriorityClass usual is already marked as default. Only one default can exist"
    err = failing(served, "create", "priorityclass", "other", "--value=20", "--global-default")
    assert err.strip() == f'error: failed to create priorityclass: priorityclasses.scheduling.k8s.io "other" {why}'
    kubectl(served, "create", "priorityclass", "other", "--value=20")
    err = failing(served, "patch", "priorityclass", "other", "--type=merge", "-p", '{"globalDefault":true}')
    assert err.strip() == f'Error from server (Forbidden): priorityclasses.scheduling.k8s.io "other" {why}'
    kubectl(served, "annotate", "priorityclass", "usual", "note=still the default")
    kubectl(served, "patch", "priorityclass", "usual", "--type=merge", "-p", '{"globalDefault":false}')
    kubectl(served, "patch", "priorityclass", "other", "--type=merge", "-p", '{"globalDefault":true}')


def test_a_bad_name_is_refused_in_apimachinerys_words(served: Serve) -> None:
    """ValidateObjectMeta's name functions: IsDNS1123Subdomain's message names its pattern and
    an example; IsDNS1123Label's says only ``must not contain dots`` of a subdomain."""
    err = failing(served, "create", "deployment", "bad_name", "--image=x")
    assert err.strip() == (
        'error: failed to create deployment: Deployment.apps "bad_name" is invalid: metadata.name: Invalid value: '
        "\"bad_name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
        "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
    err = failing(served, "create", "namespace", "team.a")
    assert err.strip() == ('The Namespace "team.a" is invalid: metadata.name: Invalid value: "team.a": must not '
                           "contain dots")
    err = failing(served, "create", "namespace", "Team")
    assert err.strip().endswith("(e.g. 'my-name',  or '123-abc', regex used for validation is "
                                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
    err = failing(served, "create", "configmap", "x" * 254)
    assert err.strip().endswith(": must be no more than 253 characters")


def test_a_containers_resources_are_validated_as_upstreams(served: Serve) -> None:
    """ValidateContainerResourceRequirements: container resources by name, quantities not
    negative and whole for extended resources, which must be limited; ``kubectl set
    resources`` of a fractional GPU is refused, where it was stored."""
    kubectl(served, "create", "deployment", "gpu", "--image=x")
    err = failing(served, "set", "resources", "deployment/gpu", "--limits=nvidia.com/gpu=1.5")
    assert err.strip() == ('error: failed to patch resources update to pod template Deployment.apps "gpu" is invalid: '
                           "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "
                           '"1500m": must be an integer')
    kubectl(served, "set", "resources", "deployment/gpu", "--limits=nvidia.com/gpu=1")
    pod = ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r"}, "spec": {"containers": '
           '[{"name": "c", "image": "x", "resources": %s}]}}')
    err = failing(served, "create", "--dry-run=server", "-f", "-", stdin=pod % '{"limits": {"cpu": "-1"}}')
    # the request is defaulted from the limit (SetDefaults_Pod), and refused as well
    assert err.strip().splitlines()[1:] == [
        '* spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        '* spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0']
    err = failing(served, "create", "--dry-run=server", "-f", "-", stdin=pod % '{"limits": {"pods": "1"}}')
    assert 'resources.limits[pods]: Invalid value: "pods": must be a standard resource for containers' in err
    err = failing(served, "create", "--dry-run=server", "-f", "-", stdin=pod % '{"requests": {"example.com/f": "1"}}')
    assert err.strip() == ('The Pod "r" is invalid: spec.containers[0].resources.limits: Required value: Limit must '
                           "be set for non overcommitable resources")
    assert "created" in kubectl(served, "create", "--dry-run=server", "-f", "-",
                                stdin=pod % '{"limits": {"example.com/f": "2", "kubernetes.io/x": "1"}}')


def test_a_pod_templates_service_account_is_named_as_a_subdomain(served: Serve) -> None:
    """ValidatePodSpec's ValidateServiceAccountName: ``kubectl set serviceaccount`` of a name
    that cannot be one is refused (a pod's create meets the ServiceAccount admission first)."""
    kubectl(served, "create", "deployment", "sa", "--image=x")
    err = failing(served, "set", "serviceaccount", "deployment/sa", "Bad_SA")
    assert err.strip().startswith('error: failed to patch ServiceAccountName Deployment.apps "sa" is invalid: '
                                  'spec.template.spec.serviceAccountName: Invalid value: "Bad_SA": a lowercase RFC '
                                  "1123 subdomain must consist of")
    err = failing(served, "run", "p", "--image=x", '--overrides={"spec": {"serviceAccountName": "Bad_SA"}}')
    assert err.strip() == ('Error from server (Forbidden): pods "p" is forbidden: error looking up service account '
                           'default/Bad_SA: serviceaccount "Bad_SA" not found')


def test_an_ingresss_hosts_class_and_tls_secret_are_names(served: Serve) -> None:
    """ValidateIngressSpec: a rule's host a DNS subdomain (a wildcard one with ``*``), not an IP
    address; the TLS hosts and secret name, and the class name, likewise."""
    err = failing(served, "create", "ingress", "upper", "--rule=Foo.com/=svc:80")
    assert err.strip().startswith('error: failed to create ingress: Ingress.networking.k8s.io "upper" is invalid: '
                                  'spec.rules[0].host: Invalid value: "Foo.com": a lowercase RFC 1123 subdomain')
    err = failing(served, "create", "ingress", "ip", "--rule=10.0.0.1/=svc:80")
    assert err.strip().endswith('spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address')
    err = failing(served, "create", "ingress", "wild", "--rule=*foo.com/=svc:80")
    assert "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain" in err
    err = failing(served, "create", "ingress", "cls", "--rule=foo.com/=svc:80,tls=My_Cert", "--class=Bad_Class")
    assert 'spec.tls[0].secretName: Invalid value: "My_Cert": a lowercase RFC 1123 subdomain' in err
    assert 'spec.ingressClassName: Invalid value: "Bad_Class": a lowercase RFC 1123 subdomain' in err
    assert "created" in kubectl(served, "create", "ingress", "fine", "--rule=*.foo.com/=svc:80,tls=my-cert",
                                "--class=nginx")


def test_names_and_labels_a_workload_makes_must_fit(served: Serve) -> None:
    """A CronJob's name leaves room for its Jobs' 11-character suffix (ValidateCronJobCreate);
    a pod template's labels are label values (ValidatePodTemplateSpec), and a Job's name longer
    than one makes its generated job-name labels refused, its own and its template's."""
    err = failing(served, "create", "cronjob", "c" * 53, "--image=x", "--schedule=* * * * *")
    assert err.strip() == (f'error: failed to create cronjob: CronJob.batch "{"c" * 53}" is invalid: metadata.name: '
                           f'Invalid value: "{"c" * 53}": must be no more than 52 characters')
    assert "created" in kubectl(served, "create", "cronjob", "c" * 52, "--image=x", "--schedule=* * * * *")
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: %s}\nspec:\n  template:\n"
           "    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}\n")
    err = failing(served, "create", "-f", "-", stdin=job % ("j" * 70))
    assert err.strip().splitlines()[1:] == [
        f'* metadata.labels: Invalid value: "{"j" * 70}": must be no more than 63 characters',
        f'* spec.template.labels: Invalid value: "{"j" * 70}": must be no more than 63 characters']
    deployment = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: long-label}\nspec:\n"
                  "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b, c: %s}}\n"
                  "    spec: {containers: [{name: c, image: x}]}\n")
    err = failing(served, "create", "-f", "-", stdin=deployment % ("v" * 64))
    assert err.strip() == (f'The Deployment "long-label" is invalid: spec.template.labels: Invalid value: '
                           f'"{"v" * 64}": must be no more than 63 characters')
