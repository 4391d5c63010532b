"""Real Kubernetes for the tests: etcd, kube-apiserver, containerd and kubelet as processes.

Nothing here is a stand-in. The binaries are the ones `tests/k8s/build.sh` builds from the
Go module `k8s.io/kubernetes` (and Debian's etcd, containerd and runc). Every process is
started by this file, remembered by its PID, and stopped by it in every outcome.

The whole suite runs inside a network namespace of its own (`tests/k8s/run` makes it): the
API servers bind to 127.0.0.1 there, and the node's address (`NODE_IP`) sits on that
namespace's loopback device, because kubelet refuses a loopback address as the node IP.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tarfile
import hashlib
import io
import random
import re
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "target" / "k8s" / "bin"
IMAGES = REPO / "target" / "k8s" / "images"
NODE_IP = os.environ.get("HUB_K8S_NODE_IP", "10.213.0.2")
NODE_NAME = "hf-node"
# HUB_K8S_MEASURE=1 runs what docs/performance.md quotes: 5 fresh pods per latency sample set,
# and the runbook's moves through kubelet (signal mode) beside in place. Without it (CI), 3 pods
# and in place only: the same assertions, on fewer samples.
MEASURE = os.environ.get("HUB_K8S_MEASURE") == "1"
SAMPLES = 5 if MEASURE else 3
# Copies instead of overlay mounts: slower for big images, and these are a few MiB.
SNAPSHOTTER = "native"
# Restart-all mode's rule (KEP-5532, alpha in 1.35) needs its gate on both the API server and
# the kubelet, and that gate needs NodeDeclaredFeatures: the API server refuses to start, and
# the kubelet panics, without it.
GATES = ("RestartAllContainersOnContainerExits", "NodeDeclaredFeatures")
# The Kubernetes the suite builds (go.mod), as charts are rendered for it: "1.35".
KUBE_VERSION = ".".join(re.search(r"^require k8s.io/kubernetes v(\d+)\.(\d+)\.", (REPO / "tests/k8s/go.mod").read_text(), re.M).groups())
FEATURE_GATES = ",".join(f"{g}=true" for g in GATES)

# The upstream worker-operator's Go module (tests/k8s/worker/go.mod) ships the CRDs it needs:
# config/crd/bases (networking.kubeslice.io) for its own cluster, tests/files/crd for a hub.
WORKER_MODULE = "github.com/kubeslice/worker-operator"
HUB_CRDS = ("controller.kubeslice.io_clusters.yaml", "controller.kubeslice.io_vpnkeyrotations.yaml",
            "worker.kubeslice.io_workerserviceimports.yaml", "worker.kubeslice.io_workersliceconfigs.yaml",
            "worker.kubeslice.io_workerslicegateways.yaml", "crd-workerslicegwrecycler.yaml")
# What an HA controller must declare on the Cluster CRD: a structural schema prunes undeclared
# status fields, so without it the API server drops every claim. The CRD in the module
# (kubeslice/apis v0.4.0) does not declare it.
ACTIVE_CONTROLLER_SCHEMA = {
    "type": "object",
    "properties": {
        "endpoint": {"type": "string"},
        "identity": {"type": "string"},
        # What KubeSlice's own HA controller writes (tests/k8s/ha_controller.py): the
        # identity under this name, and its hub's CA.
        "activeIdentity": {"type": "string"},
        "caBundle": {"type": "string"},
        "lastUpdated": {"type": "string", "format": "date-time"},
        "epoch": {"type": "integer", "format": "int64"},
    },
}
# The worker-operator's ServiceAccount on a hub, and what it needs in the project namespace
# (found by running it against an API server that logs every refusal).
WORKER_HUB_RULES = [
    {"apiGroups": ["controller.kubeslice.io"], "resources": ["clusters", "vpnkeyrotations"],
     "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["controller.kubeslice.io"], "resources": ["clusters/status", "vpnkeyrotations/status"],
     "verbs": ["get", "update", "patch"]},
    {"apiGroups": ["controller.kubeslice.io"], "resources": ["serviceexportconfigs"],
     "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["worker.kubeslice.io"], "resources": ["workersliceconfigs", "workerslicegateways", "workerserviceimports"],
     "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["worker.kubeslice.io"], "resources": ["workerslicegwrecyclers"],
     "verbs": ["create", "delete", "get", "list", "watch", "update", "patch"]},
    {"apiGroups": ["worker.kubeslice.io"], "resources": ["workersliceconfigs/status", "workerslicegateways/status",
                                                        "workerserviceimports/status", "workerslicegwrecyclers/status"],
     "verbs": ["get", "update", "patch"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]
# The API servers log every write to KubeSlice kinds, and every request of the worker-operator's
# service account (refusals included), with the user who made it: the hubs' side of the proof
# of which credential the worker used.
WORKER_SA = ("kubeslice-demo", "kubeslice-worker-1")
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "users": [f"system:serviceaccount:{WORKER_SA[0]}:{WORKER_SA[1]}"]},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete"],
         "resources": [{"group": "controller.kubeslice.io"}, {"group": "worker.kubeslice.io"}]},
        {"level": "None"},
    ],
}


def worker_module_dir() -> Path:
    """Where Go keeps the worker-operator module that tests/k8s/worker/go.mod pins (build.sh
    has downloaded it)."""
    r = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", WORKER_MODULE], cwd=REPO / "tests" / "k8s" / "worker",
                       capture_output=True, text=True, check=True)
    return Path(r.stdout.strip())


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def hub_crds(declare_claim: bool = True) -> list[dict[str, Any]]:
    """The hub CRDs from the worker-operator's module, the Cluster CRD given activeController
    (as released, without it, when not `declare_claim`)."""
    crds = [d for name in HUB_CRDS for d in yaml_docs(worker_module_dir() / "tests" / "files" / "crd" / name)]
    for crd in crds if declare_claim else []:
        if crd["metadata"]["name"] == "clusters.controller.kubeslice.io":
            for version in crd["spec"]["versions"]:
                status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
                status["properties"]["activeController"] = ACTIVE_CONTROLLER_SCHEMA
    return crds


def worker_cluster_crds() -> list[dict[str, Any]]:
    """The networking.kubeslice.io CRDs the worker-operator serves on its own cluster."""
    return [d for f in sorted((worker_module_dir() / "config" / "crd" / "bases").glob("*.yaml")) for d in yaml_docs(f)]


# Listening ports come from below the kernel's ephemeral range (32768-60999 by default), from
# which every outgoing connection takes its source port: a port the kernel picked (bind to 0)
# and then let go could be some kubectl's or follower's source port by the time the server
# binds it ("address already in use"; seen once in CI, for a kube-apiserver).
LISTEN_PORTS = range(20000, 32768)
_given: set[int] = set()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, never given twice in this process."""
    for _ in range(1000):
        port = random.choice(LISTEN_PORTS)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {LISTEN_PORTS}")


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 0.1,
             fatal: type[BaseException] | tuple[type[BaseException], ...] = ()) -> Any:
    """Polls check() until it returns something truthy; fails naming what was awaited. An
    exception of a `fatal` type ends the wait at once."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except fatal:
            raise
        except Exception as e:  # noqa: BLE001 - reported below if it never succeeds
            last_error = e
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))


def collapse(reasons: list[str]) -> list[str]:
    """Runs of one Event reason as one: a story's steps, however many Events each took."""
    return [r for i, r in enumerate(reasons) if i == 0 or reasons[i - 1] != r]


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------------------------
# Processes


@dataclass
class Proc:
    """A process this suite started. Its output goes to a log file kept for failures."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen | None = None

    def start(self) -> "Proc":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log, "ab")
        self.popen = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        out.close()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after grace; a frozen process is thawed first."""
        if not self.alive():
            return
        assert self.popen is not None
        try:
            os.kill(self.pid, signal.SIGCONT)
            self.popen.terminate()
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# Certificates


class Pki:
    """One test CA and the certificates it signs, made with the openssl command."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ca_crt = root / "ca.crt"
        self.ca_key = root / "ca.key"
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", self.ca_key, "-out", self.ca_crt, "-days", "3", "-subj", "/CN=hub-follower-test-ca",
                      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        # The service-account token signer of the API servers that share this CA.
        self.sa_key = root / "sa.key"
        self.sa_pub = root / "sa.pub"
        self._openssl("genrsa", "-out", self.sa_key, "2048")
        self._openssl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)

    def _openssl(self, *args: Any) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

    def issue(self, name: str, cn: str, org: str | None = None, ips: tuple[str, ...] = (), dns: tuple[str, ...] = ()) -> tuple[Path, Path]:
        crt, key, csr, ext = (self.root / f"{name}.{s}" for s in ("crt", "key", "csr", "ext"))
        subject = f"/CN={cn}" + (f"/O={org}" if org else "")
        self._openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", key, "-out", csr, "-subj", subject)
        sans = [f"IP:{ip}" for ip in ips] + [f"DNS:{d}" for d in dns]
        lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
                 "extendedKeyUsage=serverAuth,clientAuth"]
        if sans:
            lines.append("subjectAltName=" + ",".join(sans))
        ext.write_text("\n".join(lines) + "\n")
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_crt, "-CAkey", self.ca_key, "-CAcreateserial",
                      "-out", crt, "-days", "3", "-extfile", ext)
        return crt, key


# ---------------------------------------------------------------------------------------------
# A control plane: etcd and one kube-apiserver


@dataclass
class ControlPlane:
    """An etcd and a kube-apiserver serving on 127.0.0.1:port, with an admin kubeconfig."""

    name: str
    root: Path
    pki: Pki
    advertise: str = NODE_IP
    port: int = field(default_factory=free_port)
    etcd: Proc | None = None
    apiserver: Proc | None = None
    profiling: bool = False  # serve /debug/pprof (to system:masters), for the fleet benchmark

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    def start(self) -> "ControlPlane":
        """Starts etcd and the API server; if either fails to come up, stops what it started
        before raising, since the caller has no ControlPlane to stop."""
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> "ControlPlane":
        self.root.mkdir(parents=True, exist_ok=True)
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        self.etcd = Proc(f"{self.name}-etcd", [
            shutil.which("etcd") or "etcd", "--name", self.name, "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"{self.name}=http://127.0.0.1:{peer}", "--logger", "zap", "--log-level", "warn",
        ], self.root / "etcd.log").start()
        wait_for(f"{self.name}'s etcd", lambda: urllib.request.urlopen(f"{self.etcd_url}/health", timeout=1).status == 200, 30)

        self.serving = self.pki.issue(f"{self.name}-serving", "kube-apiserver", ips=("127.0.0.1", NODE_IP), dns=("localhost",))
        self.admin = self.pki.issue(f"{self.name}-admin", "test-admin", org="system:masters")
        self.start_apiserver()
        self._write_kubeconfig(self.kubeconfig, user={"client-certificate": str(self.admin[0]), "client-key": str(self.admin[1])})
        wait_for(f"{self.name}'s default namespace", lambda: self.kubectl("get", "namespace", "default", check=False).returncode == 0, 30)
        return self

    def start_apiserver(self) -> None:
        crt, key = self.serving
        argv = [
            str(BIN / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1", f"--advertise-address={self.advertise}",
            f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.pki.ca_crt}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={self.pki.sa_pub}",
            f"--service-account-signing-key-file={self.pki.sa_key}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.96.0.0/24",
            f"--cert-dir={self.root / 'certs'}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            f"--kubelet-certificate-authority={self.pki.ca_crt}",
            f"--kubelet-client-certificate={self.admin[0]}", f"--kubelet-client-key={self.admin[1]}",
            f"--profiling={'true' if self.profiling else 'false'}", "--v=1",
            # KEP-5532 (alpha in 1.35): container restart rules may restart every container.
            f"--feature-gates={FEATURE_GATES}",
            f"--audit-policy-file={self.root / 'audit-policy.json'}", f"--audit-log-path={self.audit_log}",
            "--audit-log-mode=blocking", "--audit-log-format=json",
        ]
        (self.root / "audit-policy.json").write_text(json.dumps(AUDIT_POLICY))
        self.apiserver = Proc(f"{self.name}-apiserver", argv, self.root / "apiserver.log").start()
        self.wait_ready()

    @property
    def audit_log(self) -> Path:
        return self.root / "audit.log"

    def audit(self) -> list[dict[str, Any]]:
        """The audit log's entries (ResponseComplete and the like), oldest first."""
        try:
            lines = self.audit_log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written
        return out

    def wait_ready(self, timeout: float = 90) -> None:
        def ready() -> bool:
            # An API server that exited (a port taken, a bad flag) never gets ready: say why now.
            if self.apiserver is not None and not self.apiserver.alive():
                tail = self.apiserver.log.read_text(errors="replace").splitlines()[-5:]
                raise AssertionError(f"{self.name}'s kube-apiserver exited: " + "\n".join(tail))
            return self.readyz() == 200

        wait_for(f"{self.name}'s kube-apiserver /readyz", ready, timeout, every=0.25, fatal=AssertionError)

    def readyz(self) -> int:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
        ctx.load_cert_chain(str(self.admin[0]), str(self.admin[1]))
        try:
            with urllib.request.urlopen(f"{self.endpoint}/readyz", context=ctx, timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def restart_apiserver(self) -> None:
        assert self.apiserver is not None
        self.apiserver.stop()
        self.start_apiserver()

    def stop(self) -> None:
        for p in (self.apiserver, self.etcd):
            if p is not None:
                p.stop()

    def _write_kubeconfig(self, path: Path, user: dict[str, str]) -> None:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": self.endpoint, "certificate-authority": str(self.pki.ca_crt)}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        }))

    # --- kubectl --------------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        r = subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", "--request-timeout=20s", *args],
                           input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} on {self.name}: {r.stderr.strip()}")
        return r

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                     input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def token(self, namespace: str, sa: str, bound_secret: str | None = None) -> str:
        args = ["create", "token", sa, "-n", namespace, "--duration=2h"]
        if bound_secret:
            args += ["--bound-object-kind=Secret", f"--bound-object-name={bound_secret}"]
        return self.kubectl(*args).stdout.strip()


# ---------------------------------------------------------------------------------------------
# A hub: a control plane serving the Cluster CRD


@dataclass
class Hub:
    """A KubeSlice controller's cluster as the worker sees it: the hub CRDs of the upstream
    worker-operator's module (the Cluster CRD declaring activeController), the worker's Cluster
    object in the project namespace, an identity that may only read it (hub-follower's in the
    process tests), and the worker-operator's own, with the Role it needs."""

    cp: ControlPlane
    namespace: str = WORKER_SA[0]
    cluster: str = "worker-1"
    reader: str = "worker-1"  # the service account hub-follower authenticates as
    worker: str = WORKER_SA[1]  # the upstream worker-operator's service account

    def install(self, declare_claim: bool = True) -> "Hub":
        cp = self.cp
        crds = hub_crds(declare_claim)
        cp.apply(*crds)
        for crd in crds:
            cp.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}", "--timeout=60s")
        ns = self.namespace
        cp.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": self.reader, "namespace": ns}},
            # An identity with no RoleBinding: every read of it is a 403 from RBAC.
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "stranger", "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cluster-reader", "namespace": ns},
             "rules": [{"apiGroups": ["controller.kubeslice.io"], "resources": ["clusters"], "verbs": ["get", "list", "watch"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "cluster-reader", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cluster-reader"},
             "subjects": [{"kind": "ServiceAccount", "name": self.reader, "namespace": ns}]},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": self.worker, "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "kubeslice-worker", "namespace": ns},
             "rules": WORKER_HUB_RULES},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "kubeslice-worker", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubeslice-worker"},
             "subjects": [{"kind": "ServiceAccount", "name": self.worker, "namespace": ns}]},
        )
        wait_for("the Cluster kind to be served", lambda: cp.kubectl("get", "clusters.controller.kubeslice.io", "-n", ns, check=False).returncode == 0, 30)
        # The dashboard enabled: the worker then skips posting dashboard credentials.
        cp.apply({"apiVersion": "controller.kubeslice.io/v1alpha1", "kind": "Cluster",
                  "metadata": {"name": self.cluster, "namespace": ns},
                  "spec": {"clusterProperty": {"monitoring": {"kubernetesDashboard": {"enabled": True}}}}})
        return self

    @property
    def worker_user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.worker}"

    def claim(self, endpoint: str, identity: str, last_updated: str | None = None, epoch: int | None = None) -> None:
        """Publishes status.activeController, as the controller does, through the status subresource."""
        claim: dict[str, Any] = {"endpoint": endpoint, "identity": identity, "lastUpdated": last_updated or now_rfc3339()}
        if epoch is not None:
            claim["epoch"] = epoch
        status = {"activeController": claim}
        self.cp.kubectl("patch", "clusters.controller.kubeslice.io", self.cluster, "-n", self.namespace,
                        "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))

    def status(self) -> dict[str, Any]:
        return self.cp.get("clusters.controller.kubeslice.io", self.cluster, "-n", self.namespace).get("status", {})

    def token(self, sa: str | None = None, bound_secret: str | None = None) -> str:
        return self.cp.token(self.namespace, sa or self.reader, bound_secret)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Images: OCI archives made here, imported into containerd; no registry


def oci_archive(out: Path, name: str, files: dict[str, tuple[Path | bytes, int]], entrypoint: list[str], user: str | None = None) -> Path:
    """Writes an OCI image layout tarball with one uncompressed layer holding `files`
    (path in the image -> (source, mode)). containerd names it from the index annotation."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        dirs: set[str] = set()
        for path in sorted(files):
            parts = path.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
                    layer.addfile(info)
            src, mode = files[path]
            data = src if isinstance(src, bytes) else Path(src).read_bytes()
            info = tarfile.TarInfo(path.strip("/"))
            info.size, info.mode, info.mtime = len(data), mode, 0
            layer.addfile(info, io.BytesIO(data))
    layer_bytes = layer_buf.getvalue()
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": entrypoint, "Env": ["PATH=/"], **({"User": user} if user else {})},
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_bytes).hexdigest()]}}
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(config).encode())},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob(layer_bytes)}]}
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", **blob(json.dumps(manifest).encode()),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1]}}]}
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w") as tar:
        def add(path: str, data: bytes) -> None:
            info = tarfile.TarInfo(path)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
        add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add("index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            add(f"blobs/sha256/{digest.split(':')[1]}", data)
    return out


# ---------------------------------------------------------------------------------------------
# A node: containerd and kubelet, registered with a control plane


@dataclass
class Node:
    cp: ControlPlane
    root: Path
    containerd: Proc | None = None
    kubelet: Proc | None = None

    @property
    def sock(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def start(self, images: list[Path], pause_image: str) -> "Node":
        c = self.root / "containerd"
        (c / "cni").mkdir(parents=True, exist_ok=True)
        # Host-network pods need no CNI, but the runtime reports its network ready only with a
        # configuration: loopback alone serves.
        (c / "cni" / "10-loopback.conflist").write_text(json.dumps(
            {"cniVersion": "0.4.0", "name": "lo", "plugins": [{"type": "loopback"}]}))
        (c / "config.toml").write_text(f"""version = 2
root = "{c / 'root'}"
state = "{c / 'state'}"
[grpc]
  address = "{self.sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # The sandbox lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{SNAPSHOTTER}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{c / 'cni'}"
""")
        self.containerd = Proc("containerd", [shutil.which("containerd") or "containerd", "--config", str(c / "config.toml")],
                               self.root / "containerd.log").start()
        wait_for("containerd's socket", self.sock.exists, 30)
        for image in images:
            subprocess.run(["ctr", "--address", str(self.sock), "-n", "k8s.io", "images", "import",
                            f"--snapshotter={SNAPSHOTTER}", str(image)], check=True, capture_output=True)

        k = self.root / "kubelet"
        k.mkdir(parents=True, exist_ok=True)
        serving = self.cp.pki.issue("kubelet-serving", NODE_NAME, ips=(NODE_IP, "127.0.0.1"), dns=(NODE_NAME,))
        client = self.cp.pki.issue("kubelet-client", f"system:node:{NODE_NAME}", org="system:masters")
        kubeconfig = k / "kubeconfig"
        self.cp._write_kubeconfig(kubeconfig, user={"client-certificate": str(client[0]), "client-key": str(client[1])})
        self.kubelet_port = free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": NODE_IP, "port": self.kubelet_port, "readOnlyPort": 0, "healthzPort": 0,
            "cgroupDriver": "cgroupfs", "containerRuntimeEndpoint": f"unix://{self.sock}",
            "tlsCertFile": str(serving[0]), "tlsPrivateKeyFile": str(serving[1]),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(self.cp.pki.ca_crt)}},
            "authorization": {"mode": "AlwaysAllow"},
            "failSwapOn": False, "cgroupsPerQOS": False, "enforceNodeAllocatable": [],
            "localStorageCapacityIsolation": False, "makeIPTablesUtilChains": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "syncFrequency": "5s", "fileCheckFrequency": "5s", "nodeStatusUpdateFrequency": "5s",
            "serializeImagePulls": False, "resolvConf": "/etc/resolv.conf",
            "failCgroupV1": False,
            "featureGates": dict.fromkeys(GATES, True),
            "podLogsDir": str(self.root / "pod-logs"),
        }
        (k / "config.json").write_text(json.dumps(config))
        self.kubelet = Proc("kubelet", [
            str(BIN / "kubelet"), f"--config={k / 'config.json'}", f"--kubeconfig={kubeconfig}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}", f"--root-dir={k / 'root'}",
            f"--cert-dir={k / 'pki'}", "--v=2",
        ], self.root / "kubelet.log").start()
        wait_for("the node to be Ready", self._ready, 120, every=0.5)
        return self

    def _ready(self) -> bool:
        if not (self.kubelet and self.kubelet.alive()):
            raise RuntimeError("kubelet exited:\n" + (self.kubelet.tail() if self.kubelet else ""))
        node = self.cp.get("node", NODE_NAME)
        return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))

    def stop(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        if self.containerd is not None and self.containerd.alive():
            # The pods' shims and processes outlive containerd; end them through it first.
            subprocess.run(["ctr", "--address", str(self.sock), "-n", "k8s.io", "tasks", "ls", "-q"], capture_output=True)
            for task in _ctr_lines(self.sock, "tasks", "ls", "-q"):
                subprocess.run(["ctr", "--address", str(self.sock), "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", task], capture_output=True)
            time.sleep(1)
            for task in _ctr_lines(self.sock, "tasks", "ls", "-q"):
                subprocess.run(["ctr", "--address", str(self.sock), "-n", "k8s.io", "tasks", "delete", "-f", task], capture_output=True)
            self.containerd.stop()
        # Mounts of the pods' volumes (tmpfs for Secrets) stay after kubelet; unmount ours.
        for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
            target = line.split()[1]
            if target.startswith(str(self.root)):
                subprocess.run(["umount", "-l", target], capture_output=True)


def _ctr_lines(sock: Path, *args: str) -> list[str]:
    r = subprocess.run(["ctr", "--address", str(sock), "-n", "k8s.io", *args], capture_output=True, text=True)
    return [line.strip() for line in r.stdout.splitlines() if line.strip()]


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()
