"""The server's configuration: one immutable value built from the command line.

``controlplane serve`` parses its flags (DESIGN.md fixes their names) into a
``Config``; everything the server starts receives it. Fields that have a
derived default (``store_url`` from ``data_dir``, the generated token file
next to the data directory) are resolved here, so readers never recompute them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .controllermanager import canonical, check, is_enabled

__all__ = ["ADMISSION_WEBHOOK_MODES", "AUTHORIZATION_MODES", "DISABLEABLE_ADMISSION_PLUGINS", "HTTP_PROTOCOLS",
           "LOG_LEVELS", "SA_EXTENDED_SECONDS", "SA_WARN_ONLY_SECONDS", "SNAPSHOT_MODES", "Config", "JobBackoff",
           "NodeLifecycle"]

SnapshotMode = Literal["lazy", "copy"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
HttpProtocol = Literal["controlplane", "uvicorn"]
AdmissionWebhookMode = Literal["reachable", "all", "off"]

AUTHORIZATION_MODES = ("AlwaysAllow", "Node", "RBAC")  # --authorization-mode lists some, comma-separated
SNAPSHOT_MODES: tuple[SnapshotMode, ...] = ("lazy", "copy")
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error", "critical")
HTTP_PROTOCOLS: tuple[HttpProtocol, ...] = ("controlplane", "uvicorn")
ADMISSION_WEBHOOK_MODES: tuple[AdmissionWebhookMode, ...] = ("reachable", "all", "off")
# the admission plugins --disable-admission-plugins may name (upstream's names)
DISABLEABLE_ADMISSION_PLUGINS = ("TaintNodesByCondition",)

# service account token lifetimes (upstream's pkg/serviceaccount and its flags' bounds, seconds):
# kubelet's projected token (WarnOnlyBoundTokenExpirationSeconds), what it is extended to
# (ExpirationExtensionSeconds), and the range of --service-account-max-token-expiration
SA_WARN_ONLY_SECONDS = 3600 + 7
SA_EXTENDED_SECONDS = 365 * 24 * 3600
SA_MIN_MAX_EXPIRATION, SA_MAX_MAX_EXPIRATION = 3600, 1 << 32


@dataclass(frozen=True, slots=True)
class NodeLifecycle:
    """The node lifecycle controller's settings: kube-controller-manager's flags of the same
    names, with their defaults (``controllers/nodelifecycle.py``)."""

    # how often every node's health is checked (--node-monitor-period)
    monitor_period: float = 5.0
    # a node whose Lease and Ready heartbeat have both stood still this long turns Unknown
    # (--node-monitor-grace-period: 50 s since 1.32)
    monitor_grace_period: float = 50.0
    # the same for a node that never posted a Ready condition, from its creation
    # (--node-startup-grace-period)
    startup_grace_period: float = 60.0
    # nodes a second given a NoExecute taint in a healthy zone (--node-eviction-rate), and in
    # a zone whose unhealthy share reaches the threshold (--secondary-node-eviction-rate; 0 in
    # a zone of at most --large-cluster-size-threshold nodes)
    eviction_rate: float = 0.1
    secondary_eviction_rate: float = 0.01
    unhealthy_zone_threshold: float = 0.55
    large_cluster_size_threshold: int = 50

    def __post_init__(self) -> None:
        for name in ("monitor_period", "monitor_grace_period", "startup_grace_period"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name.replace('_', ' ')} must be > 0 seconds, not {getattr(self, name)}")
        for name in ("eviction_rate", "secondary_eviction_rate", "large_cluster_size_threshold"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name.replace('_', ' ')} must be >= 0, not {getattr(self, name)}")
        if not 0 < self.unhealthy_zone_threshold <= 1:
            raise ValueError(f"unhealthy zone threshold must be in (0, 1], not {self.unhealthy_zone_threshold}")


@dataclass(frozen=True, slots=True)
class JobBackoff:
    """How long the Job controller waits before replacing a failed pod (``controllers/jobbackoff.py``):
    ``base`` after one failure, doubling with each consecutive one, at most ``cap``. Upstream's
    constants (DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff), no flag of
    kube-controller-manager's; tests shorten them (``serve --job-pod-failure-backoff``)."""

    base: float = 10.0
    cap: float = 360.0

    def __post_init__(self) -> None:
        if not 0 <= self.base <= self.cap:
            raise ValueError(f"job pod failure backoff must be >= 0 and at most its cap ({self.cap} s), "
                             f"not {self.base}")


@dataclass(frozen=True, slots=True)
class AuditLog:
    """Audit logging, kube-apiserver's ``--audit-policy-file``, ``--audit-log-*`` and
    ``--audit-webhook-*`` flags (``api/audit.py``, ``api/auditlog.py``, ``api/auditwebhook.py``):
    on only with both a policy file and a backend (a path or a webhook configuration)."""

    policy_file: Path | None = None
    path: str = ""  # "-": standard output
    format: str = "json"  # or "legacy"
    mode: str = "blocking"  # or "batch"
    max_age: int = 0  # days a rotated file is kept (0: no limit)
    max_backups: int = 0  # rotated files kept (0: all)
    max_size: int = 0  # megabytes before a rotation (0: lumberjack's 100)
    compress: bool = False  # rotated files gzipped
    buffer_size: int = 10000  # events queued in batch mode
    # --audit-log-truncate-*: (max event size, max batch size) when enabled
    truncate: tuple[int, int] | None = None
    # the webhook backend (api/auditwebhook.py), --audit-webhook-*: on with a config file
    webhook_config_file: Path | None = None
    webhook_mode: str = "batch"
    webhook_buffer_size: int = 10000
    webhook_max_size: int = 400
    webhook_max_wait: float = 30.0
    webhook_throttle_enable: bool = True
    webhook_throttle_qps: float = 10.0
    webhook_throttle_burst: int = 15
    webhook_initial_backoff: float = 10.0
    webhook_version: str = "audit.k8s.io/v1"
    webhook_truncate: tuple[int, int] | None = None

    @property
    def enabled(self) -> bool:
        return self.policy_file is not None and (bool(self.path) or self.webhook_config_file is not None)


@dataclass(frozen=True, slots=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 6443
    data_dir: Path = Path(".controlplane/data")
    # "" means lmdb://<data_dir>; see ``store_url``.
    store: str = ""
    kubeconfig_out: Path = Path(".controlplane/kubeconfig")
    # None: serve generates an admin token into ``generated_token_file``.
    token_auth_file: Path | None = None
    authorization_mode: str = "AlwaysAllow"  # comma-separated modes, in order: "Node,RBAC" (kubeadm's)
    nodes: int = 0
    scheduler: bool = True
    # kube-controller-manager's --controllers: which of its controllers run, in its list syntax
    # (controllermanager.py); the components that are not its own do not read it
    controllers: tuple[str, ...] = ("*",)
    # the Karpenter-like autoscaler: always (True), or once a NodePool exists (False)
    autoscaler: bool = False
    # an instance-type catalog file replacing the built-in one (nodes and autoscaler)
    instance_types: Path | None = None
    # KWOK Stage files replacing the simulated nodes' built-in stages (read together)
    stages: tuple[Path, ...] = ()
    # KWOK's --enable-crds: ("Stage",) takes the simulated nodes' stages from the Stage objects stored
    enable_crds: tuple[str, ...] = ()
    # KWOK's --manage-nodes-with-label-selector for the simulated nodes ("": every fake node)
    manage_nodes_selector: str = ""
    # KWOK's --manage-nodes-with-annotation-selector: which nodes are fake, by their annotations
    manage_nodes_annotation_selector: str = "kwok.x-k8s.io/node=fake"
    # KWOK's --manage-all-nodes: the simulator plays every node
    manage_all_nodes: bool = False
    # the simulated kubelets record their Events about pods' containers (serve --no-pod-events: not)
    pod_events: bool = True
    # the simulated kubelets record their Events about their nodes (serve --no-node-events: not)
    node_events: bool = True
    # the simulated kubelets register their nodes' CSINodes (serve --no-csi-nodes: not)
    csi_nodes: bool = True
    # the external provisioners the simulated one acts for besides the CSI drivers a CSIDriver
    # registers (serve --volume-provisioners; "*", the default: every one)
    volume_provisioners: tuple[str, ...] = ("*",)
    # the built-in stages' failure model (nodes/podfailure.py): each run of a Job's pod fails so often,
    # with this exit code; the kubelet's crash-loop back-off (10 s doubling to 5 min)
    job_failure_rate: float = 0.0
    job_failure_exit_code: int = 1
    crash_backoff: float = 10.0
    crash_backoff_max: float = 300.0
    # finished pods kept before the pod garbage collector deletes the oldest
    # (kube-controller-manager's --terminated-pod-gc-threshold; 0: never)
    terminated_pod_gc_threshold: int = 12_500
    # seconds between a HorizontalPodAutoscaler's reconciles, and before a new or changed one's first
    # (kube-controller-manager's --horizontal-pod-autoscaler-sync-period)
    hpa_sync_period: float = 15.0
    # seconds after a pod's start during which its CPU counts for a HorizontalPodAutoscaler only once
    # it has been ready for a whole metric window (--horizontal-pod-autoscaler-cpu-initialization-period)
    hpa_cpu_initialization_period: float = 300.0
    # seconds between the pod garbage collector's sweeps (upstream's gcCheckPeriod, a constant
    # there); tests shorten it
    pod_gc_check_period: float = 20.0
    # "copy" is the naive baseline (copy the cache under its lock), kept for side-by-side benchmarks.
    watch_cache_snapshot: SnapshotMode = "lazy"
    log_level: LogLevel = "info"
    # TLS, as kube-apiserver: on by default with a generated CA (``pki_dir``), or
    # with ``--tls-cert-file``/``--tls-private-key-file``; ``--no-tls`` serves plain HTTP.
    tls: bool = True
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    # more names (DNS names or IP addresses) the generated serving certificate covers, as
    # k3s's --tls-san: the names other machines or containers reach the server by
    tls_sans: tuple[str, ...] = ()
    # kube-apiserver's --client-ca-file: a client certificate this CA signed authenticates
    # its subject (CN the user, O the groups); None: client certificates are not asked for
    client_ca_file: Path | None = None
    # API server processes sharing the port (``serve --workers``); ``components`` is False
    # in all but the first, so the scheduler, nodes and controllers run once
    workers: int = 1
    components: bool = True
    # a ``serve --workers`` process forked at start with the first (not one started again in
    # place of one that died): the first does the once-a-start work they would all repeat,
    # the garbage collector's look-ups of what its scan of the store finds (api/dependents.py)
    forked_worker: bool = False
    # the components in a process of their own, a client of the first API server over
    # its socket (``serve --components-process``): they get a core of their own
    components_process: bool = False
    # HTTP/1.1 on the connections: our own protocol (api/http1.py), or uvicorn's httptools
    # one, kept as the side-by-side peer of the benchmarks
    http_protocol: HttpProtocol = "controlplane"
    # which admission webhooks are called (api/webhooks.py): those something on this machine
    # answers for ("reachable"), every one as kube-apiserver ("all": an unreachable one's
    # failurePolicy applies), or none ("off")
    admission_webhooks: AdmissionWebhookMode = "reachable"
    # kube-apiserver's AdmissionConfiguration file, of which the PodSecurity plugin's
    # configuration is read (api/podsecurity.py; None: upstream's defaults, privileged, no exemptions)
    admission_control_config_file: Path | None = None
    # kube-apiserver's --disable-admission-plugins, of those this server lets be turned off
    # (DISABLEABLE_ADMISSION_PLUGINS): TaintNodesByCondition, as upstream's integration tests and
    # scheduler_perf turn it off where no node lifecycle controller takes its taint off (api/nodetaint.py)
    disable_admission_plugins: tuple[str, ...] = ()
    # seconds between compactions of the store's history (kube-apiserver's
    # --etcd-compaction-interval, 5 minutes); 0 never compacts (store/compactor.py)
    compaction_interval: float = 300.0
    # seconds an Event is kept after its last write (kube-apiserver's --event-ttl, 1 hour:
    # upstream's etcd lease on each Event write); 0 keeps them (api/eventttl.py)
    event_ttl: float = 3600.0
    # API Priority and Fairness (api/flowcontrol.py): the two limits' sum is each server
    # process's concurrency limit, shared by the priority levels; without it
    # (--enable-priority-and-fairness=false) they limit reads and writes (0: no limit)
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    enable_priority_and_fairness: bool = True
    node_lifecycle: NodeLifecycle = NodeLifecycle()
    job_backoff: JobBackoff = JobBackoff()
    audit: AuditLog = AuditLog()
    # service account tokens, as kube-apiserver's flags of the same names (api/tokenrequest.py):
    # the issuers accepted, the first one signing (() is https://kubernetes.default.svc.cluster.local);
    # the private key that signs and the public keys that verify (None: the generated
    # ``pki_dir/sa.key``, the key files verifying besides it; no key files: the signing
    # key's own); the discovery's jwks_uri
    # ("": this server's /openid/v1/jwks); the audiences of the API (() is the issuers)
    service_account_issuers: tuple[str, ...] = ()
    service_account_signing_key_file: Path | None = None
    service_account_key_files: tuple[Path, ...] = ()
    service_account_jwks_uri: str = ""
    api_audiences: tuple[str, ...] = ()
    # the longest a TokenRequest's token is valid, seconds (0: no limit), and whether kubelet's
    # pod-bound 3607 s tokens are valid a year whatever that limit (upstream's default)
    service_account_max_token_expiration: float = 0.0
    service_account_extend_token_expiration: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is outside 1..65535")
        if self.max_requests_inflight < 0 or self.max_mutating_requests_inflight < 0:
            raise ValueError("--max-requests-inflight and --max-mutating-requests-inflight must not be negative")
        if self.enable_priority_and_fairness and self.max_requests_inflight + self.max_mutating_requests_inflight < 1:
            raise ValueError("--max-requests-inflight plus --max-mutating-requests-inflight must be positive "
                             "with API Priority and Fairness")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, not {self.workers}")
        if not self.compaction_interval >= 0:
            raise ValueError(f"compaction interval must be >= 0 seconds, not {self.compaction_interval}")
        if not self.event_ttl >= 0:
            raise ValueError(f"event TTL must be >= 0 seconds, not {self.event_ttl}")
        if self.nodes < 0:
            raise ValueError(f"nodes must be >= 0, not {self.nodes}")
        self.authorization_modes()  # (ValueError: an unknown mode, one named twice)
        if self.watch_cache_snapshot not in SNAPSHOT_MODES:
            raise ValueError(f"watch cache snapshot {self.watch_cache_snapshot!r} is not one of {SNAPSHOT_MODES}")
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file go together")
        if self.tls_cert_file is not None and not self.tls:
            raise ValueError("--tls-cert-file contradicts --no-tls")
        if self.tls_sans and (self.tls_cert_file is not None or not self.tls):
            raise ValueError("--tls-san names what the generated certificate covers: it contradicts "
                             + ("--tls-cert-file" if self.tls else "--no-tls"))
        if self.client_ca_file is not None and not self.tls:
            raise ValueError("--client-ca-file contradicts --no-tls (client certificates are a TLS handshake's)")
        if self.client_ca_file is not None and self.http_protocol != "controlplane":
            raise ValueError("--client-ca-file needs --http-protocol controlplane (uvicorn's does not pass "
                             "the client's certificate to the app)")
        unknown = [p for p in self.disable_admission_plugins if p not in DISABLEABLE_ADMISSION_PLUGINS]
        if unknown:
            raise ValueError(f"--disable-admission-plugins: {', '.join(unknown)}: only "
                             f"{', '.join(DISABLEABLE_ADMISSION_PLUGINS)} can be turned off here")
        if self.admission_webhooks not in ADMISSION_WEBHOOK_MODES:
            raise ValueError(f"admission webhooks {self.admission_webhooks!r} is not one of {ADMISSION_WEBHOOK_MODES}")
        if self.http_protocol not in HTTP_PROTOCOLS:
            raise ValueError(f"HTTP protocol {self.http_protocol!r} is not one of {HTTP_PROTOCOLS}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log level {self.log_level!r} is not one of {LOG_LEVELS}")
        self._check_service_accounts()
        check(self.controllers)  # upstream's message for a name it does not know

    def _check_service_accounts(self) -> None:
        """kube-apiserver's checks of its service account flags."""
        issuers = self.service_account_issuers
        if any(not i for i in issuers):
            raise ValueError("service-account-issuer should not be an empty string")
        if len(set(issuers)) != len(issuers):
            raise ValueError("service-account-issuer " + next(i for i in issuers if issuers.count(i) > 1)
                             + " specified more than once")
        longest = self.service_account_max_token_expiration
        if longest and not SA_MIN_MAX_EXPIRATION <= longest <= SA_MAX_MAX_EXPIRATION:
            raise ValueError("the service-account-max-token-expiration must be between 1 hour and 2^32 seconds")
        if self.service_account_jwks_uri and not self.service_account_jwks_uri.startswith("https://"):
            raise ValueError("service-account-jwks-uri requires https scheme, parsed as: "
                             + self.service_account_jwks_uri)

    def service_account_expiration_warnings(self) -> list[str]:
        """kube-apiserver's warnings at start about a maximum the extension goes past."""
        longest = self.service_account_max_token_expiration
        if not (self.service_account_extend_token_expiration and longest):
            return []
        warnings = []
        if longest < SA_WARN_ONLY_SECONDS:
            warnings.append("service-account-extend-token-expiration is true, in order to correctly trigger safe "
                            "transition logic, service-account-max-token-expiration must be set longer than "
                            f"{SA_WARN_ONLY_SECONDS} seconds (currently {_go_duration(longest)})")
        if longest < SA_EXTENDED_SECONDS:
            warnings.append(f"service-account-extend-token-expiration is true, enabling tokens valid up to "
                            f"{SA_EXTENDED_SECONDS} seconds, which is longer than "
                            f"service-account-max-token-expiration set to {_go_duration(longest)} seconds")
        return warnings

    def authorization_modes(self) -> tuple[str, ...]:
        """``authorization_mode``'s modes in order, checked as kube-apiserver checks them."""
        modes = tuple(m.strip() for m in self.authorization_mode.split(","))
        for mode in modes:
            if mode not in AUTHORIZATION_MODES:  # (upstream's messages, Go's %q)
                raise ValueError(f'authorization-mode "{mode}" is not a valid mode (this server has '
                                 f"{', '.join(AUTHORIZATION_MODES)})")
        if len(set(modes)) != len(modes):
            quoted = " ".join(f'"{m}"' for m in modes)
            raise ValueError(f"authorization-mode [{quoted}] has mode specified more than once")
        return modes

    def kubelet_identities(self) -> bool:
        """Whether the simulated kubelets write as ``system:node:<node>`` (identities.py): unless
        RBAC authorizes without the Node authorizer, which upstream needs to allow them anything
        (the ``system:node`` binding has no subjects): the simulator then writes as KWOK's
        controller, as KWOK does, whose nodes have no kubelet at all."""
        modes = self.authorization_modes()
        return "Node" in modes or "RBAC" not in modes

    def controller_enabled(self, name: str) -> bool:
        """Whether kube-controller-manager's controller ``name`` (its canonical name) runs
        under ``--controllers``."""
        return is_enabled(name, tuple(canonical(e) for e in self.controllers))

    @property
    def store_url(self) -> str:
        """The URL given to ``store.open``: ``--store``, or ``lmdb://<data_dir>``."""
        return self.store or f"lmdb://{self.data_dir}"

    @property
    def generated_token_file(self) -> Path:
        """Where ``serve`` writes the admin token when no ``--token-auth-file`` is given:
        beside the data directory (``.controlplane/tokens.csv`` by default)."""
        return self.data_dir.parent / "tokens.csv"

    @property
    def pki_dir(self) -> Path:
        """Where ``serve`` keeps its generated CA and serving certificate: beside the
        data directory (``.controlplane/pki`` by default)."""
        return self.data_dir.parent / "pki"

    @property
    def server_url(self) -> str:
        """The URL clients on this machine use to reach the server (for the kubeconfig).

        >>> Config(host="0.0.0.0", port=8080).server_url
        'https://127.0.0.1:8080'
        >>> Config(host="::1", tls=False).server_url
        'http://[::1]:6443'
        """
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def _go_duration(seconds: float) -> str:
    """Seconds as Go's Duration.String writes them (``24h0m0s``, ``30m0s``, ``45s``)."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"
