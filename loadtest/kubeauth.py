"""Credentials as client-go takes them from a kubeconfig, for every client of the harness.

:func:`from_kubeconfig` reads the current context of a kubeconfig into a
:class:`Credentials`: its user's ``token`` or ``tokenFile``, ``username`` and
``password``, client certificate (``client-certificate``/``client-key`` files or
their ``-data``), or ``exec`` plugin; its cluster's ``server``,
``certificate-authority(-data)``, ``insecure-skip-tls-verify`` and
``tls-server-name``. Relative paths are the kubeconfig's directory's, as clientcmd
resolves them (an exec command only when it holds a ``/``). ``--token`` without a
kubeconfig is :func:`bearer`.

Every client of the harness authenticates through one ``Credentials``: the
preflight checks and the ``/metrics`` scrapes (httpx, :meth:`Credentials.httpx_client`)
and the Locust users (geventhttpclient, :meth:`Credentials.ssl_context` and
:meth:`Credentials.authorization`). It travels to Locust's workers, local and remote,
as JSON in ``LOADTEST_AUTH`` (:meth:`Credentials.to_env`, :func:`from_env`) with the
files' contents inlined, since a remote worker does not have the harness's files.

Precedence, as client-go's: a bearer token (static) before basic auth before the
exec plugin's token; a client certificate (static, or the exec plugin's) is
presented in the handshake whatever the header. A ``tokenFile`` is read again when what
was read is 50 s old, as client-go's cached file token source (a minute, refreshed 10 s
early), so a rotated token (a projected service account token's) is taken; while the file
cannot be read, or is empty, the last token read is kept (a remote worker, without the
file, keeps the one it was sent). TLS is verified against the
kubeconfig's CA (the system's roots without one) unless ``insecure-skip-tls-verify``;
without a kubeconfig (``--target`` and ``--token``) it is not verified, as before.

An exec plugin (``client.authentication.k8s.io/v1`` or ``v1beta1``) is run as
client-go runs it: its ``command`` and ``args``, the process's environment plus its
``env``, ``KUBERNETES_EXEC_INFO`` holding an ExecCredential whose spec says
``interactive: false`` (and the cluster, with ``provideClusterInfo``), no stdin; its
stdout is an ExecCredential whose ``status`` has a ``token``, or a client
certificate and key, or both. Its ``interactiveMode`` (``Never``, ``IfAvailable``;
``IfAvailable`` by default for v1beta1) runs it without a terminal; ``Always`` is refused
with client-go's words when its standard input is not a terminal, which the harness's never
is; another mode is client-go's validation error. A command not found is client-go's error,
with the stanza's ``installHint``; a failed one says its exit code, as client-go. The
result is kept until its ``expirationTimestamp`` passes, or until a request it
authenticated gets 401 (:meth:`Credentials.unauthorized`); then the plugin runs again.
Each process runs it itself. Invariant: ``generation`` grows each time the credentials
change (a token read again from its file included), ``cert_generation`` each time the client
certificate does (connections made with the old one must be made again).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import datetime
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Credentials", "CredentialsError", "ExecPlugin", "bearer", "for_target", "from_env", "from_kubeconfig"]

ENV = "LOADTEST_AUTH"
EXEC_INFO_ENV = "KUBERNETES_EXEC_INFO"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT = 120.0  # client-go waits for ever; a hung plugin should not hang a run
EXEC_MODES = ("Never", "IfAvailable", "Always")
TOKEN_FILE_SECONDS = 50.0  # client-go's file token source: kept a minute, read again 10 s before
NOT_INSTALLED = ("\n\nIt looks like you are trying to use a client-go credential plugin that is not installed.\n\n"
                 "To learn more about this feature, consult the documentation available at:\n"
                 "      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
                 "#client-go-credential-plugins")
_clock = time.monotonic  # (tests move it)


class CredentialsError(Exception):
    """Credentials that cannot be used: a kubeconfig's bad field, or an exec plugin that failed."""


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` stanza, and the cluster it would be told of."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    provide_cluster_info: bool = False
    cluster: dict[str, Any] = field(default_factory=dict)  # ExecCredential spec.cluster
    install_hint: str = ""  # printed when the command is not found

    def exec_info(self) -> str:
        """What ``KUBERNETES_EXEC_INFO`` holds: the ExecCredential the plugin is to complete."""
        spec: dict[str, Any] = {"interactive": False}
        if self.provide_cluster_info:
            spec["cluster"] = self.cluster
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})


@dataclass
class _Issued:
    """What an exec plugin last said."""

    token: str = ""
    cert_pem: str = ""
    key_pem: str = ""
    expires: float | None = None  # time.time(); None: does not expire


@dataclass
class Credentials:
    """How to authenticate to the server and how to trust it. ``origin`` names where they
    came from, for messages: ``--token``, ``--kubeconfig`` or ``""`` (none)."""

    token: str = ""
    token_file: str = ""  # a kubeconfig's tokenFile (absolute), read again as client-go does
    username: str = ""
    password: str = ""
    cert_pem: str = ""
    key_pem: str = ""
    ca_pem: str = ""
    verify: bool = False  # verify the server's certificate (against ca_pem, or the system's roots)
    tls_server_name: str = ""
    exec: ExecPlugin | None = None
    origin: str = ""
    unsupported: str = ""  # what the kubeconfig's user has that the harness cannot use (an auth-provider)
    generation: int = 0
    cert_generation: int = 0
    _issued: _Issued | None = field(default=None, repr=False)
    _token_read_at: float | None = field(default=None, repr=False)  # _clock() of token_file's last read
    _lock: Any = field(default_factory=threading.Lock, repr=False)
    _files: dict[str, tuple[Path, Path]] = field(default_factory=dict, repr=False)

    # -- what a request carries -------------------------------------------------------
    def authorization(self) -> str | None:
        """The ``Authorization`` header's value for a request now (None: none), running the
        exec plugin when it has not run or what it gave has expired."""
        if self.token_file:
            self._reread_token_file()
        if self.token:
            return f"Bearer {self.token}"
        if self.username or self.password:
            pair = f"{self.username}:{self.password}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        if self.exec is not None:
            issued = self._current()
            return f"Bearer {issued.token}" if issued.token else None
        return None

    def unauthorized(self, generation: int) -> None:
        """A request sent with the credentials of ``generation`` got 401: an exec plugin's are
        asked for again, unless they changed since (client-go's maybeRefreshCreds)."""
        if self.exec is None:
            return
        with self._lock:
            if generation == self.generation:
                self._run_exec()

    def client_cert(self) -> tuple[str, str] | None:
        """(certificate PEM, key PEM) to present, static or the exec plugin's; None: none."""
        if self.cert_pem:
            return self.cert_pem, self.key_pem
        if self.exec is not None:
            issued = self._current()
            if issued.cert_pem:
                return issued.cert_pem, issued.key_pem
        return None

    def ssl_context(self, **_ignored: Any) -> ssl.SSLContext:
        """A client TLS context: the server verified as the kubeconfig says, the client
        certificate (if any) loaded. Made with the ``ssl`` module's classes at call time
        (gevent's, in a Locust process). Accepts and ignores a ``cafile``: geventhttpclient
        offers its own CA bundle, the kubeconfig's CA is the one that counts."""
        if self.verify:
            context = ssl.create_default_context(cadata=self.ca_pem or None)
            if not self.ca_pem:
                context.load_default_certs()
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        cert = self.client_cert()
        if cert is not None:
            context.load_cert_chain(*self._cert_files(*cert))
        return context

    def httpx_client(self, **kwargs: Any) -> Any:
        """An ``httpx.Client`` with these credentials: its TLS context, ``tls-server-name``
        as the name to verify, the ``Authorization`` of each request taken as it is sent."""
        import httpx

        credentials = self

        class _Auth(httpx.Auth):
            def auth_flow(self, request: httpx.Request) -> Any:
                generation = credentials.generation
                value = credentials.authorization()
                if value:
                    request.headers["authorization"] = value
                response = yield request
                if response.status_code == 401:
                    credentials.unauthorized(generation)

        client = httpx.Client(verify=self.ssl_context(), auth=_Auth(), **kwargs)
        if self.tls_server_name:
            client.event_hooks["request"] = [self._sni]
        return client

    def _sni(self, request: Any) -> None:
        request.extensions["sni_hostname"] = self.tls_server_name

    def describe(self) -> str:
        """What authenticates, for messages: "the token of --kubeconfig" and the like; "" for nothing."""
        if self.token:
            what = "the token"
        elif self.username or self.password:
            what = "the username and password"
        elif self.exec is not None:
            what = f"what the exec plugin ({Path(self.exec.command).name}) gave"
        elif self.cert_pem:
            what = "the client certificate"
        else:
            return ""
        return f"{what} {'given with --token' if self.origin == '--token' else 'of --kubeconfig'}"

    # -- to and from the workers ----------------------------------------------------------
    def to_env(self) -> str:
        """JSON for ``LOADTEST_AUTH``; :func:`from_env` reads it back in a worker."""
        plugin = None
        if self.exec is not None:
            plugin = {**self.exec.__dict__, "args": list(self.exec.args), "env": [list(p) for p in self.exec.env]}
        return json.dumps({"token": self.token, "token_file": self.token_file,
                           "username": self.username, "password": self.password,
                           "cert_pem": self.cert_pem, "key_pem": self.key_pem, "ca_pem": self.ca_pem,
                           "verify": self.verify, "tls_server_name": self.tls_server_name, "exec": plugin,
                           "origin": self.origin})

    def _reread_token_file(self) -> None:
        """``token`` from ``token_file`` when what was read is ``TOKEN_FILE_SECONDS`` old (or
        was never read here); kept as it is while the file cannot be read or is empty."""
        now = _clock()
        with self._lock:
            if self._token_read_at is not None and now - self._token_read_at < TOKEN_FILE_SECONDS:
                return
            self._token_read_at = now
            try:
                token = Path(self.token_file).read_text().strip()
            except (OSError, UnicodeDecodeError):
                return
            if token and token != self.token:
                self.token = token
                self.generation += 1

    # -- the exec plugin ----------------------------------------------------------------
    def _current(self) -> _Issued:
        with self._lock:
            issued = self._issued
            if issued is None or (issued.expires is not None and time.time() >= issued.expires):
                issued = self._run_exec()
            return issued

    def _run_exec(self) -> _Issued:
        """Run the plugin and keep what it says (the lock held)."""
        plugin = self.exec
        assert plugin is not None
        env = {**os.environ, **dict(plugin.env), EXEC_INFO_ENV: plugin.exec_info()}
        try:
            done = subprocess.run([plugin.command, *plugin.args], env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, timeout=EXEC_TIMEOUT, check=False)
        except (FileNotFoundError, PermissionError, NotADirectoryError):  # Go's exec.Error: not runnable
            hint = f"\n\n{plugin.install_hint}" if plugin.install_hint else ""
            raise CredentialsError(f"exec: executable {plugin.command} not found{NOT_INSTALLED}{hint}") from None
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CredentialsError(f"exec: {e}") from None
        if done.returncode != 0:
            raise CredentialsError(f"exec: executable {plugin.command} failed with exit code {done.returncode}")
        issued = _read_exec_credential(done.stdout, plugin)
        previous = self._issued
        self._issued = issued
        self.generation += 1
        if previous is None or (previous.cert_pem, previous.key_pem) != (issued.cert_pem, issued.key_pem):
            self.cert_generation += 1
        return issued

    def _cert_files(self, cert_pem: str, key_pem: str) -> tuple[Path, Path]:
        """Files holding the pair (ssl loads a chain only from files), private to this process."""
        key = cert_pem + key_pem
        files = self._files.get(key)
        if files is None:
            directory = Path(tempfile.mkdtemp(prefix="loadtest-cert-"))  # 0700
            atexit.register(shutil.rmtree, directory, True)
            files = directory / "tls.crt", directory / "tls.key"
            for path, text in zip(files, (cert_pem, key_pem), strict=True):
                path.touch(mode=0o600)
                path.write_text(text)
            self._files[key] = files
        return files


def _read_exec_credential(stdout: bytes, plugin: ExecPlugin) -> _Issued:
    """The credentials of an ExecCredential a plugin printed, checked as client-go checks them."""
    where = f"exec plugin {plugin.command}"
    try:
        cred = json.loads(stdout)
    except ValueError as e:
        raise CredentialsError(f"{where}: its output is not an ExecCredential (decoding stdout: {e})") from None
    if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
        raise CredentialsError(f"{where}: its output is not an ExecCredential")
    if cred.get("apiVersion") != plugin.api_version:
        raise CredentialsError(f"{where} is configured to use API version {plugin.api_version}, plugin returned "
                               f"version {cred.get('apiVersion')}")
    status = cred.get("status")
    if not isinstance(status, dict):
        raise CredentialsError(f"{where} didn't return a status field")
    token, cert, key = (str(status.get(k) or "") for k in ("token", "clientCertificateData", "clientKeyData"))
    if not (token or cert or key):
        raise CredentialsError(f"{where} didn't return a token or cert/key pair")
    if bool(cert) != bool(key):
        raise CredentialsError(f"{where} returned only certificate or key, not both")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            at = datetime.datetime.fromisoformat(str(status["expirationTimestamp"]).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialsError(f"{where}: expirationTimestamp {status['expirationTimestamp']!r} is not "
                                   "RFC 3339") from None
        expires = (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).timestamp()
    return _Issued(token, cert, key, expires)


# --------------------------------------------------------------------------- making them

def bearer(token: str) -> Credentials:
    """``--token`` without a kubeconfig: the server is not verified."""
    return Credentials(token=token, origin="--token" if token else "")


def from_env() -> Credentials:
    """A worker's credentials: ``LOADTEST_AUTH``, else a bare ``LOADTEST_TOKEN`` (a locustfile
    run alone)."""
    text = os.environ.get(ENV)
    if not text:
        return bearer(os.environ.get("LOADTEST_TOKEN", ""))
    d = json.loads(text)
    plugin = d.pop("exec", None)
    if plugin is not None:
        plugin = ExecPlugin(**{**plugin, "args": tuple(plugin["args"]),
                               "env": tuple((k, v) for k, v in plugin["env"])})
    return Credentials(**d, exec=plugin)


def for_target(kubeconfig: Path | None, token: str | None, target: str | None,
               context: str | None = None) -> tuple[str | None, Credentials]:
    """(target, credentials) from the harness's ``--kubeconfig``, ``--context``, ``--token`` and
    ``--target``, as kubectl takes its flags: the kubeconfig's context's (``context``, else its
    current one's) user and its cluster's CA, and its server unless ``target`` names one; ``token``
    in place of its user's token, or alone (``bearer``). The target loses a trailing ``/``: Locust
    joins it with each path, and ``//api`` fails."""
    auth = bearer(token or "")
    if context is not None and kubeconfig is None:
        raise CredentialsError("--context names a context of a --kubeconfig: give the kubeconfig")
    if kubeconfig is not None:
        auth, server = from_kubeconfig(kubeconfig, context)
        if token:  # kubectl's --token: the kubeconfig's tokenFile no longer counts
            auth.token, auth.token_file, auth.origin = token, "", "--token"
        target = target or server
        if target is None:
            raise CredentialsError(f"{kubeconfig}'s {'context ' + repr(context) if context else 'current context'} "
                                  "names no cluster server; give --target")
    return (target.rstrip("/") if target is not None else None), auth


def from_kubeconfig(path: Path, context: str | None = None) -> tuple[Credentials, str | None]:
    """(credentials, server) of the kubeconfig's context ``context``, else its current context."""
    import yaml

    try:
        kc = yaml.safe_load(path.read_text())
    except OSError as e:
        raise CredentialsError(f"cannot read --kubeconfig {path}: {e.strerror or e}") from e
    except yaml.YAMLError as e:
        raise CredentialsError(f"--kubeconfig {path} is not YAML: {e}") from e
    if not isinstance(kc, dict):
        raise CredentialsError(f"--kubeconfig {path} is not a kubeconfig")
    reader = _Reader(path, kc)
    name = context if context is not None else kc.get("current-context")
    if (name or context is not None) and not reader.has("contexts", name):
        # client-go's error for a --context, or a current-context, the kubeconfig lacks (its user's
        # credentials had been none, and the run stopped at a 401 that blamed the user)
        raise CredentialsError(f"--kubeconfig {path}: context was not found for specified context: {name}")
    ctx = reader.named("contexts", name, "context")
    user = reader.named("users", ctx.get("user"), "user")
    cluster = reader.named("clusters", ctx.get("cluster"), "cluster")
    creds = Credentials(origin="--kubeconfig", verify=not cluster.get("insecure-skip-tls-verify"),
                        tls_server_name=str(cluster.get("tls-server-name") or ""))
    creds.ca_pem = reader.pem(cluster, "certificate-authority", "the cluster's CA")
    creds.token = str(user.get("token") or "")
    if user.get("tokenFile"):  # read now (an unreadable one is an error without a token), then again
        creds.token_file = str((path.parent / str(user["tokenFile"])).absolute())
        if not creds.token:
            creds.token = reader.text(str(user["tokenFile"]), "the tokenFile").strip()
    creds.username, creds.password = str(user.get("username") or ""), str(user.get("password") or "")
    creds.cert_pem = reader.pem(user, "client-certificate", "the client certificate")
    creds.key_pem = reader.pem(user, "client-key", "the client key")
    if bool(creds.cert_pem) != bool(creds.key_pem):
        raise CredentialsError(f"--kubeconfig {path}: its user has a client certificate without its key, "
                               "or a key without its certificate")
    if isinstance(user.get("exec"), dict):
        creds.exec = reader.exec_plugin(user["exec"], cluster, creds)
    elif user.get("auth-provider"):
        provider = user["auth-provider"]
        name = provider.get("name") if isinstance(provider, dict) else None
        creds.unsupported = f"an auth-provider ({name or '?'}), which the harness does not run"
    server = cluster.get("server")
    return creds, str(server) if server else None


class _Reader:
    """A kubeconfig's parts, with its relative paths resolved beside it (clientcmd's
    ResolveLocalPaths) and its errors naming it."""

    def __init__(self, path: Path, kc: dict[str, Any]) -> None:
        self.path, self.kc = path, kc

    def has(self, section: str, name: object) -> bool:
        """Whether ``section`` has an entry called ``name``."""
        entries = self.kc.get(section)
        return any(isinstance(e, dict) and e.get("name") == name
                   for e in (entries if isinstance(entries, list) else ()))

    def named(self, section: str, name: object, key: str) -> dict[str, Any]:
        """The ``key`` of the entry of ``section`` called ``name`` ({} if none, or not a kubeconfig's shape)."""
        entries = self.kc.get(section)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and entry.get("name") == name:
                value = entry.get(key)
                if value is not None and not isinstance(value, dict):
                    raise CredentialsError(f"--kubeconfig {self.path} is not a kubeconfig: the {key} of {name!r} "
                                           f"in {section} is not a mapping")
                return value or {}
        return {}

    def text(self, name: str, what: str) -> str:
        try:
            return (self.path.parent / name).read_text()
        except OSError as e:
            raise CredentialsError(f"cannot read {what} of --kubeconfig {self.path}: {e.strerror or e}") from e

    def pem(self, section: dict[str, Any], key: str, what: str) -> str:
        """``key-data`` (base64 of PEM) or the file ``key`` names; "" for neither."""
        data = section.get(f"{key}-data")
        if data:
            try:
                return base64.b64decode(str(data), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise CredentialsError(f"--kubeconfig {self.path}: {key}-data is not base64 of PEM") from None
        return self.text(str(section[key]), what) if section.get(key) else ""

    def exec_plugin(self, stanza: dict[str, Any], cluster: dict[str, Any], creds: Credentials) -> ExecPlugin:
        where = f"--kubeconfig {self.path}: its exec plugin"
        command, version = str(stanza.get("command") or ""), str(stanza.get("apiVersion") or "")
        if not command:
            raise CredentialsError(f"{where} names no command")
        if version not in EXEC_API_VERSIONS:
            raise CredentialsError(f"{where}'s apiVersion {version or '(none)'} is not one the harness speaks "
                                   f"({', '.join(EXEC_API_VERSIONS)})")
        mode = stanza.get("interactiveMode") or ("IfAvailable" if version.endswith("v1beta1") else "")
        if not mode:
            raise CredentialsError(f"{where}: interactiveMode must be specified for {version}")
        if mode not in EXEC_MODES:
            raise CredentialsError(f"{where}: invalid interactiveMode: {mode!r} (one of {', '.join(EXEC_MODES)})")
        if mode == "Always":  # client-go's words: the harness gives a plugin no terminal
            raise CredentialsError(f"{where}: exec plugin cannot support interactive mode: standard input is not "
                                   "a terminal")
        if "/" in command and not command.startswith("/"):
            command = str(self.path.parent / command)
        env = stanza.get("env") or []
        pairs = tuple((str(e.get("name")), str(e.get("value") or "")) for e in env if isinstance(e, dict))
        info: dict[str, Any] = {"server": str(cluster.get("server") or "")}
        if creds.tls_server_name:
            info["tls-server-name"] = creds.tls_server_name
        if not creds.verify:
            info["insecure-skip-tls-verify"] = True
        if creds.ca_pem:
            info["certificate-authority-data"] = base64.b64encode(creds.ca_pem.encode()).decode()
        for key in ("proxy-url", "disable-compression"):
            if cluster.get(key):
                info[key] = cluster[key]
        for ext in cluster.get("extensions") or ():
            if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
                info["config"] = ext.get("extension")
        return ExecPlugin(command, version, tuple(str(a) for a in stanza.get("args") or ()), pairs,
                          bool(stanza.get("provideClusterInfo")), info, str(stanza.get("installHint") or ""))
