"""The warnings of a valid pod or workload write, in upstream's words (pkg/api/pod/warnings.go)."""

from __future__ import annotations

from typing import Any

from controlplane.registry.podwarnings import name_warning, pod_warnings
from controlplane.registry.strategies import warnings


def test_a_plain_pod_gets_no_warning() -> None:
    spec = {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)"}]}],
            "topologySpreadConstraints": [{"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {}}],
            "terminationGracePeriodSeconds": 30}
    assert pod_warnings(spec, {"name": "p"}) == []
    assert warnings("pods", {"metadata": {"name": "p"}, "spec": spec}) == []


def test_deprecated_labels_selectors_annotations_and_volumes() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [
                    {"key": "beta.kubernetes.io/instance-type", "operator": "Exists"}]}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}]},
        },
        "topologySpreadConstraints": [{"topologyKey": "failure-domain.beta.kubernetes.io/zone", "maxSkew": 1}],
        "volumes": [{"name": "v", "gitRepo": {"repository": "r"}}],
        "containers": [{"name": "c"}],
    }
    meta = {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
                            "container.seccomp.security.alpha.kubernetes.io/c": "runtime/default"}}
    assert pod_warnings(spec, meta, "spec.template.") == [
        "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
        ".matchExpressions[0].key: beta.kubernetes.io/instance-type is deprecated since v1.17; use "
        '"node.kubernetes.io/instance-type" instead',
        "spec.template.spec.topologySpreadConstraints[0].topologyKey: failure-domain.beta.kubernetes.io/zone is "
        'deprecated since v1.17; use "topology.kubernetes.io/zone" instead',
        "spec.template.spec.topologySpreadConstraints[0].labelSelector: a null labelSelector results in matching "
        "no pod",
        "spec.template.spec.volumes[0].gitRepo: deprecated in v1.11",
        "spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; "
        'use the "seccompProfile" field instead',
        "spec.template.metadata.annotations[container.seccomp.security.alpha.kubernetes.io/c]: non-functional in "
        'v1.27+; use the "seccompProfile" field instead',
        "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".labelSelector: a null labelSelector results in matching no pod",
    ]


def test_duplicates_ports_and_grace() -> None:
    spec = {
        "hostAliases": [{"ip": "1.2.3.4"}, {"ip": "1.2.3.4"}],
        "imagePullSecrets": [{"name": "s"}, {"name": "s"}, {}],
        "initContainers": [{"name": "i", "ports": [{"containerPort": 80, "protocol": "TCP", "hostPort": 8080}]}],
        "containers": [{"name": "c", "ports": [
            {"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 81, "protocol": "TCP", "hostIP": "10.0.0.1"},
            {"containerPort": 82, "protocol": "TCP", "hostPort": 82},
            {"containerPort": 82, "protocol": "TCP", "hostPort": 82, "hostIP": "10.0.0.2"}],
            "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "x$(A)"}, {"name": "A", "valueFrom": {}}]}],
        "terminationGracePeriodSeconds": -5,
    }
    assert pod_warnings(spec, {}) == [
        'spec.hostAliases[1].ip: duplicate ip "1.2.3.4"',
        'spec.imagePullSecrets[1].name: duplicate name "s"',
        'spec.imagePullSecrets[2].name: invalid empty name ""',
        'spec.containers[0].env[2]: hides previous definition of "A", which may be dropped when using apply',
        "spec.containers[0].ports[0]: overlapping port definition with spec.initContainers[0].ports[0]",
        "spec.containers[0].ports[1]: hostIP set without hostPort: {Name: HostPort:0 ContainerPort:81 "
        "Protocol:TCP HostIP:10.0.0.1}",
        "spec.containers[0].ports[3]: dangerously ambiguous port definition with spec.containers[0].ports[2]",
        "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be treated as 1",
    ]


def test_names_and_when_workloads_warn() -> None:
    assert name_warning("pods", "a.b") == [
        "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label "
        "is recommended: [must not contain dots]"]
    template = {"spec": {"nodeSelector": {"beta.kubernetes.io/os": "linux"}, "containers": [{"name": "c"}]}}
    deploy = {"metadata": {"name": "d.x", "generation": 1}, "spec": {"template": template}}
    words = ('spec.template.spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use '
             '"kubernetes.io/os" instead')
    assert warnings("deployments", deploy) == [name_warning("deployments", "d.x")[0], words]
    assert warnings("deployments", deploy, deploy) == []  # an update that left the generation: none
    assert warnings("deployments", {**deploy, "metadata": {"name": "d.x", "generation": 2}}, deploy) == [words]
    assert warnings("deployments", deploy, None, "status") == []
    assert warnings("pods", {"metadata": {"generateName": "web-"}, "spec": {}}) == []  # its name to come
    assert warnings("replicasets", {"metadata": {"generateName": "a.b-"}, "spec": {}}) == \
        name_warning("replicasets", "a.b-xxxxx")
    pod = {"metadata": {"name": "p"}, "spec": template["spec"]}
    assert warnings("pods", pod) == [words.replace("spec.template.", "")]
    assert warnings("pods", pod, pod) == []  # upstream skips a pod's updates
    assert warnings("statefulsets", {**deploy, "metadata": {"name": "s.x"}}) == [words]  # no name warning there
    cronjob = {"metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": template}}}}
    assert warnings("cronjobs", cronjob) == [words.replace("spec.template.", "spec.jobTemplate.spec.template.")]
    assert warnings("podtemplates", {"metadata": {"name": "t"}, "template": template}) == \
        [words.replace("spec.template.", "template.")]


def test_an_ingress_class_annotation_warns_at_create_only() -> None:
    words = "annotation \"kubernetes.io/ingress.class\" is deprecated, please use 'spec.ingressClassName' instead"
    ing: dict[str, Any] = {"metadata": {"name": "i", "annotations": {"kubernetes.io/ingress.class": "nginx"}},
                           "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}
    assert warnings("ingresses", ing) == [words]
    assert warnings("ingresses", ing, ing) == []
    assert warnings("ingresses", {**ing, "spec": {**ing["spec"], "ingressClassName": "nginx"}}) == []


def test_fractional_byte_quantities() -> None:
    """``MilliValue() % 1000 != 0`` (rounded up) for memory and ephemeral storage, the value
    as upstream's ``String()`` writes it."""
    spec = {"overhead": {"memory": "1.5"},
            "containers": [{"name": "c", "resources": {"limits": {"memory": "100m", "cpu": "100m"},
                                                       "requests": {"ephemeral-storage": "1e-3",
                                                                    "memory": "0.9999999"}}}],
            "ephemeralContainers": [{"name": "d", "resources": {"requests": {"memory": "1Gi"}}}]}
    assert pod_warnings(spec, {}) == [
        'spec.overhead[memory]: fractional byte value "1500m" is invalid, must be an integer',
        'spec.containers[0].resources.limits[memory]: fractional byte value "100m" is invalid, must be an integer',
        'spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value "1e-3" is invalid, must be '
        "an integer",
    ]


def test_claims_and_ephemeral_volumes() -> None:
    claim = {"metadata": {"name": "c", "annotations": {"volume.beta.kubernetes.io/storage-class": "x"}},
             "spec": {"resources": {"requests": {"storage": "1.5"}, "limits": {"storage": "1Gi"}}}}
    assert warnings("persistentvolumeclaims", claim) == [
        "metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use "
        '"storageClassName" attribute instead',
        'spec.resources.requests[storage]: fractional byte value "1500m" is invalid, must be an integer']
    assert warnings("persistentvolumeclaims", claim, claim) == warnings("persistentvolumeclaims", claim)
    assert warnings("persistentvolumeclaims", claim, claim, "status") == []
    spec = {"volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "resources": {"requests": {"storage": "100m"}}}}}}, {"name": "w", "rbd": {}}]}
    assert pod_warnings(spec, {}) == [
        'spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests[storage]: fractional byte value '
        '"100m" is invalid, must be an integer',
        "spec.volumes[1].rbd: deprecated in v1.28, non-functional in v1.31+"]


def test_service_warnings() -> None:
    headless = {"metadata": {"name": "s", "annotations": {"service.kubernetes.io/topology-aware-hints": "auto"}},
                "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"], "loadBalancerIP": "1.2.3.4",
                         "externalIPs": ["010.0.0.1"], "sessionAffinity": "ClientIP", "externalName": "x.example.com",
                         "trafficDistribution": "PreferClose"}}
    assert warnings("services", headless) == [
        "annotation service.kubernetes.io/topology-aware-hints is deprecated, please use "
        "service.kubernetes.io/topology-mode instead",
        "spec.loadBalancerIP is ignored for headless services",
        "spec.externalIPs is ignored for headless services",
        "spec.SessionAffinity is ignored for headless services",
        'spec.externalIPs[0]: non-standard IP address "010.0.0.1" will be considered invalid in a future Kubernetes '
        'release: use "10.0.0.1"',
        'spec.externalName is ignored when spec.type is not "ExternalName"',
        'spec.trafficDistribution: "PreferClose" is deprecated; use "PreferSameZone"',
    ]
    assert warnings("services", headless, headless) == warnings("services", headless)  # updates too
    assert warnings("services", headless, headless, "status") == []
    plain = {"metadata": {"name": "s"}, "spec": {"type": "ClusterIP", "clusterIP": "10.0.0.9",
                                                 "clusterIPs": ["10.0.0.9"], "sessionAffinity": "None"}}
    assert warnings("services", plain) == []


def test_service_source_ranges_and_external_ips_warnings() -> None:
    """GetWarningsForService: each load balancer source range not in standard form
    (GetWarningsForCIDR: host bits, leading zeros, IPv6 not in RFC 5952 form), and external IPs
    (deprecated) of a Service neither headless nor ExternalName."""
    service = {"metadata": {"name": "s"}, "spec": {
        "type": "LoadBalancer", "clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"], "externalIPs": ["192.0.2.1"],
        "loadBalancerSourceRanges": ["10.0.0.0/8", "10.1.2.3/16", "010.0.0.0/8", "2001:DB8::/32", "2001:db8::1/32",
                                     " 10.0.0.0/8"]}}
    assert warnings("services", service) == [
        "spec.externalIPs is deprecated and may no longer be implemented in some clusters",
        'spec.loadBalancerSourceRanges[1]: CIDR value "10.1.2.3/16" is ambiguous in this context (should be '
        '"10.1.0.0/16" or "10.1.2.3/32"?)',
        'spec.loadBalancerSourceRanges[2]: non-standard CIDR value "010.0.0.0/8" will be considered invalid in a '
        'future Kubernetes release: use "10.0.0.0/8"',
        'spec.loadBalancerSourceRanges[3]: IPv6 CIDR value "2001:DB8::/32" should be in RFC 5952 canonical format '
        '("2001:db8::/32")',
        'spec.loadBalancerSourceRanges[4]: CIDR value "2001:db8::1/32" is ambiguous in this context (should be '
        '"2001:db8::/32" or "2001:db8::1/128"?)',
    ]
    external_name = {"metadata": {"name": "s"}, "spec": {"type": "ExternalName", "externalName": "x.example.com",
                                                         "externalIPs": ["192.0.2.1"]}}
    assert warnings("services", external_name) == ['spec.externalIPs is ignored when spec.type is "ExternalName"']


def test_overlapping_volume_paths_are_warned_of() -> None:
    """warningsForOverlappingVirtualPaths: items of one volume at one path or one inside the
    other (a trailing slash cut, "a" and "ab" apart), across a projected volume's sources each
    with its source's words, and an empty projected source; a lone token path is none."""
    spec = {"containers": [{"name": "c"}], "volumes": [
        {"name": "cm", "configMap": {"name": "conf", "items": [
            {"key": "k1", "path": "path"}, {"key": "k2", "path": "path/path2"}, {"key": "k3", "path": "pathx"},
            {"key": "k4", "path": "pathx/"}]}},
        {"name": "s", "secret": {"secretName": "sec", "items": [{"key": "a", "path": "a"}, {"key": "b", "path": "b"}]}},
        {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}},
                                                {"path": "n", "fieldRef": {"fieldPath": "metadata.uid"}}]}},
        {"name": "p", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "root", "items": [{"key": "ca", "path": "token"}]}},
            {"configMap": {"name": "all"}},
            {},
            {"downwardAPI": {"items": [{"path": "token/ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
    ]}
    expected = [
        'volume "cm" (ConfigMap "conf"): overlapping paths: "path/path2" with "path"',
        'volume "cm" (ConfigMap "conf"): overlapping paths: "pathx" with "pathx"',
        'volume "d" (DownwardAPI): overlapping paths: "n" with "n"',
        'volume "p" (Projected): overlapping paths: "token" (ConfigMap "root") with "token" (ServiceAccountToken)',
        'volume "p" (Projected) has no sources provided',
        'volume "p" (Projected): overlapping paths: "token/ns" (DownwardAPI) with "token" (ServiceAccountToken)',
        'volume "p" (Projected): overlapping paths: "token/ns" (DownwardAPI) with "token" (ConfigMap "root")',
    ]
    assert pod_warnings(spec, {}) == expected
    template = {"spec": {"template": {"spec": spec}}}  # (no field path: a template's words are the same)
    assert warnings("deployments", {"metadata": {"name": "d"}, **template}) == expected


def test_a_templates_apparmor_annotation_without_its_field() -> None:
    """A template's deprecated AppArmor annotation of a container without an appArmorProfile
    (its own or the pod's) is warned of; a pod's is not (its fields are set from it)."""
    profile = {"appArmorProfile": {"type": "Unconfined"}}
    spec = {"containers": [{"name": "a"}, {"name": "b", "securityContext": profile}],
            "initContainers": [{"name": "i"}]}
    meta = {"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "runtime/default",
                            "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
                            "container.apparmor.security.beta.kubernetes.io/i": "unconfined"}}
    words = 'deprecated since v1.30; use the "appArmorProfile" field instead'
    assert pod_warnings(spec, meta, "spec.template.") == [
        f"spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/i]: {words}",
        f"spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: {words}"]
    assert pod_warnings(spec, meta) == []
    pod_level = {**spec, "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}
    assert pod_warnings(pod_level, meta, "spec.template.") == []


def test_an_indexed_jobs_many_completions_and_high_parallelism() -> None:
    """WarningsForJobSpec: an Indexed Job (a CronJob's too) of more than 10^5 completions and a
    parallelism above 10^4, before its template's warnings; an update only when the
    generation moves; not at the limits, nor for a NonIndexed Job."""
    words = ("In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, "
             "Kubernetes might not be able to track completedIndexes when a big number of indexes fail")
    template = {"spec": {"containers": [{"name": "c"}], "terminationGracePeriodSeconds": -1}}
    spec = {"completionMode": "Indexed", "completions": 100_001, "parallelism": 10_001, "template": template}
    job = {"metadata": {"name": "j", "generation": 1}, "spec": spec}
    grace = "spec.template.spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and will be " \
            "treated as 1"
    assert warnings("jobs", job) == [f"spec: {words}", grace]
    assert warnings("jobs", job, job) == []
    assert warnings("jobs", job, {"metadata": {"generation": 0}}) == [f"spec: {words}", grace]
    cron = {"metadata": {"name": "cj"}, "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": spec}}}
    assert warnings("cronjobs", cron)[0] == f"spec.jobTemplate.spec: {words}"
    for changed in ({"completions": 100_000}, {"parallelism": 10_000}, {"completionMode": "NonIndexed"}):
        assert warnings("jobs", {"metadata": {"name": "j"}, "spec": {**spec, **changed}}) == [grace]


def test_the_common_volumes_take_the_short_way() -> None:
    """The admitted kube-api-access volume's sources are the ones podwarnings knows to overlap
    nothing, and the short checks agree with the full one."""
    from controlplane.api.serviceaccount import token_volume
    from controlplane.registry import podwarnings

    admitted = token_volume("kube-api-access-x")
    assert admitted["projected"]["sources"] == podwarnings._ADMITTED_SOURCES
    assert podwarnings.volume_path_warnings(admitted) == []
    plain = {"name": "c", "configMap": {"name": "c", "items": [{"key": "a", "path": "a"}, {"key": "b", "path": "b"}]}}
    assert podwarnings._distinct_names([plain]) and podwarnings.volume_path_warnings(plain) == []
    not_distinct: tuple[list[dict[str, Any]], ...] = (
        [{}], [{"configMap": {"name": "c", "items": [{"key": "a", "path": "a/b"}]}}],
        [{"serviceAccountToken": {"path": "t"}}, {"secret": {"name": "s", "items": [{"key": "k", "path": "t"}]}}])
    for sources in not_distinct:
        assert not podwarnings._distinct_names(sources)
    assert podwarnings._distinct_names([{"configMap": {"name": "all"}}, {"serviceAccountToken": {"path": "t"}}])
