"""The example chart's pod on a real node: kubelet and containerd, with the two real hubs.

The chart is rendered with real Helm (tests/chart/chartkit.py). No scheduler or
controller-manager runs, so the Deployment's pod template is created as a Pod bound to the
node; from there on it is the real kubelet that starts, probes, restarts and orders the
containers. The pod uses the host network (the suite's own network namespace): the hubs
listen on its 127.0.0.1.
"""

from __future__ import annotations

import copy
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from follower import binary
from kube import IMAGES, KUBE_VERSION, NODE_NAME, REPO, SAMPLES, ControlPlane, Node, b64, collapse, oci_archive, wait_for

sys.path.insert(0, str(REPO / "tests" / "chart"))
import chartkit  # noqa: E402

NS = "kubeslice-system"
A_ID, B_ID = "ctrl-a", "ctrl-b"
LONG_AGO = "2026-01-01T00:00:00Z"
IMAGE_REPO = "hubfollower.test"
PAUSE = f"{IMAGE_REPO}/pause:test"
RESULTS = REPO / "target" / "k8s" / "failover-latency.json"


def build_images() -> list[Path]:
    IMAGES.mkdir(parents=True, exist_ok=True)
    for prog in ("manager", "pause"):
        subprocess.run(["gcc", "-static", "-O2", "-o", str(IMAGES / prog), str(REPO / "tests/k8s/images" / f"{prog}.c")], check=True)
    hf = binary()
    assert hf.exists(), f"{hf} is missing: scripts/test builds it (HUB_FOLLOWER_RELEASE_BINARY)"
    return [
        oci_archive(IMAGES / "pause.tar", PAUSE, {"pause": (IMAGES / "pause", 0o755)}, ["/pause"]),
        oci_archive(IMAGES / "worker.tar", f"{IMAGE_REPO}/worker:test", {"manager": (IMAGES / "manager", 0o755)}, ["/manager"], user="65532"),
        oci_archive(IMAGES / "hub-follower.tar", f"{IMAGE_REPO}/hub-follower:test", {"hub-follower": (hf, 0o755)}, ["/hub-follower"], user="65532"),
    ]


@pytest.fixture(scope="module")
def node(workdir: Path, pki, hubs):
    """A third control plane (the worker's own cluster) and a kubelet registered with it."""
    cp = ControlPlane("workload", workdir / "workload", pki)
    n = Node(cp, workdir / "node")
    try:
        cp.start()
        n.start(build_images(), PAUSE)
        a, b = hubs
        # What kube-controller-manager would have made, and the worker's hub credentials.
        cp.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NS}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt", "namespace": NS},
             "data": {"ca.crt": pki.ca_crt.read_text()}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kubeslice-hub-token", "namespace": NS},
             "data": {"token": b64(a.token()), "ca.crt": b64(a.cp.pki.ca_crt.read_bytes())}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kubeslice-hub-secondary-token", "namespace": NS},
             "data": {"token": b64(b.token()), "ca.crt": b64(b.cp.pki.ca_crt.read_bytes())}},
        )
        yield n
    finally:
        n.stop()
        cp.stop()


@pytest.fixture(scope="module")
def example_chart(tmp_path_factory):
    import helm_python as helm

    with helm.Chart.load(chartkit.prepare_charts(tmp_path_factory.mktemp("charts"))) as chart:
        yield chart


class Pod:
    """One rendering of the example chart, running on the node."""

    def __init__(self, node: Node, chart, hubs, name: str, mode: str, native: bool, extra: dict[str, Any] | None = None,
                 worker: dict[str, Any] | None = None, worker_env: dict[str, str] | None = None,
                 labels: dict[str, str] | None = None):
        a, b = hubs
        self.cp, self.name = node.cp, name
        values = {
            "worker": {"image": {"repository": f"{IMAGE_REPO}/worker", "tag": "test", "pullPolicy": "Never"},
                       "hubEndpoint": a.cp.endpoint, "projectNamespace": a.namespace, "clusterName": a.cluster,
                       **(worker or {})},
            "hubFollower": {"image": {"repository": f"{IMAGE_REPO}/hub-follower", "tag": "test", "pullPolicy": "Never"},
                            "secondary": {"endpoint": b.cp.endpoint},
                            "restart": {"mode": mode}, "nativeSidecar": native, **(extra or {})},
        }
        rendered = chartkit.render(chart, values, kube_version=KUBE_VERSION)
        template = rendered.deployment["spec"]["template"]
        spec = copy.deepcopy(template["spec"])
        spec.update(nodeName=NODE_NAME, hostNetwork=True, dnsPolicy="Default")
        # The chart's Role and RoleBinding for Events, and the way to this cluster's API server:
        # without kube-proxy the `kubernetes` Service's cluster IP leads nowhere, so the
        # sidecar gets the API server's address itself (an explicit env entry wins over
        # kubelet's service variables).
        self.rbac = rendered.kind("Role") + rendered.kind("RoleBinding")
        for c in spec.get("initContainers", []) + spec["containers"]:
            if c["name"] == "manager":
                c.setdefault("env", []).extend({"name": k, "value": v} for k, v in (worker_env or {}).items())
            if c["name"] == "hub-follower":
                c.setdefault("env", []).extend([
                    {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": str(node.cp.port)},
                ])
        self.manifest = {"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": NS, **copy.deepcopy(template["metadata"])},
                         "spec": spec}
        self.manifest["metadata"].setdefault("labels", {}).update(labels or {})

    def create(self) -> "Pod":
        if self.rbac:
            self.cp.apply(*self.rbac)
        self.cp.apply(self.manifest)
        return self

    def delete(self) -> None:
        self.cp.kubectl("delete", "pod", self.name, "-n", NS, "--ignore-not-found", "--grace-period=5", "--wait=true", "--timeout=90s", check=False, timeout=120)

    def get(self) -> dict[str, Any]:
        return self.cp.get("pod", self.name, "-n", NS)

    def container(self, name: str) -> dict[str, Any]:
        status = self.get()["status"]
        for c in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
            if c["name"] == name:
                return c
        return {}

    def restarts(self, name: str) -> int:
        return self.container(name).get("restartCount", 0)

    def ready(self) -> bool:
        return all(self.container(n).get("ready") for n in ("manager", "hub-follower"))

    def logs(self, container: str, previous: bool = False) -> list[str]:
        args = ["logs", self.name, "-n", NS, "-c", container, "--timestamps"] + (["--previous"] if previous else [])
        r = self.cp.kubectl(*args, check=False)
        if r.returncode != 0:
            # Shown with a failing test's output: why a log read came back empty.
            print(f"kubectl logs {self.name} -c {container} failed: {r.stderr.strip()}")
            return []
        return r.stdout.splitlines()

    def worker_hub(self) -> str | None:
        """The hub the running worker said it started with."""
        for line in reversed(self.logs("manager")):
            if "worker started: hub=" in line:
                return line.split("hub=")[1].split()[0]
        return None

    def worker_started_at(self) -> float | None:
        for line in reversed(self.logs("manager")):
            if "worker started: hub=" in line:
                return parse_time(line.split()[0])
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        items = self.cp.get("events", "-n", NS, "--field-selector", f"involvedObject.name={self.name}")["items"]
        return [e for e in items if e["reason"] == reason]

    def recorded(self) -> list[dict[str, Any]]:
        """The Events hub-follower recorded on this pod, oldest first."""
        items = self.cp.get("events.v1.events.k8s.io", "-n", NS)["items"]
        mine = [e for e in items if e.get("regarding", {}).get("name") == self.name and e.get("reportingController") == "hub-follower"]
        return sorted(mine, key=lambda e: e.get("eventTime") or "")

    def sidecar_pid(self) -> int:
        """The sidecar's process, through containerd: the task of its container."""
        return self.task_pid("hub-follower")

    def task_pid(self, container: str) -> int:
        """The first process of a container, through containerd: the task of its container."""
        cid = self.container(container)["containerID"].split("://")[1]
        out = subprocess.run(["ctr", "--address", str(NODE_SOCK[0]), "-n", "k8s.io", "tasks", "ls"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines()[1:]:
            task, pid, status = line.split()[:3]
            if task == cid and status == "RUNNING":
                return int(pid)
        raise AssertionError(f"no running task for the {container} container {cid}")

    def describe(self) -> str:
        return self.cp.kubectl("describe", "pod", self.name, "-n", NS, check=False).stdout


NODE_SOCK: list[Path] = []


def parse_time(stamp: str) -> float:
    # RFC 3339 with nanoseconds, as kubelet writes container log lines.
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + (float("0." + frac) if frac else 0.0)


@pytest.fixture
def deploy(node, example_chart, hubs, request):
    """Creates pods of the example chart; deletes every one after the test. On a failure the
    pod's description and logs go into the report."""
    NODE_SOCK[:] = [node.sock]
    made: list[Pod] = []
    for hub in hubs:
        hub.claim(hubs[0].cp.endpoint, A_ID, LONG_AGO)

    def _deploy(mode: str, native: bool, extra: dict[str, Any] | None = None, wait_ready: bool = True, **worker) -> Pod:
        name = f"worker-{mode}-{'native' if native else 'classic'}-{len(made)}"
        pod = Pod(node, example_chart, hubs, name, mode, native, extra, **worker).create()
        made.append(pod)
        if wait_ready:
            wait_for(f"{name} ready", pod.ready, 120, every=0.5)
        return pod

    yield _deploy
    failed = getattr(request.node, "rep_call", None)
    for pod in made:
        if failed is not None and failed.failed:
            print(pod.describe())
            for c in ("manager", "hub-follower"):
                print(f"--- {c}\n" + "\n".join(pod.logs(c)[-30:]))
        pod.delete()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


MODES = [("signal", True), ("signal", False), ("liveness", True), ("liveness", False), ("none", True), ("none", False),
         ("in-place", True), ("in-place", False)]


@pytest.mark.parametrize("mode,native", MODES, ids=[f"{m}-{'native' if n else 'classic'}" for m, n in MODES])
def test_a_promotion_moves_the_worker_exactly_once_and_leaves_the_sidecar_alone(deploy, hubs, mode, native):
    a, b = hubs
    pod = deploy(mode, native)
    assert pod.worker_hub() == a.cp.endpoint
    b.claim(b.cp.endpoint, B_ID)
    if mode == "none":
        # Observe only: the switch is published, the worker is never touched.
        wait_for("the observed restart in the sidecar's log", lambda: any("would restart the worker" in l for l in pod.logs("hub-follower")), 60)
        decided_at(pod)  # fails unless the switch itself was published
        time.sleep(10)
        assert pod.restarts("manager") == 0
        assert pod.worker_hub() == a.cp.endpoint
    elif mode == "in-place":
        # The wrapper restarts the worker inside its container: kubelet restarts nothing.
        wait_for("the worker restarted in place on B", lambda: pod.worker_hub() == b.cp.endpoint, 180, every=0.5)
        wait_for("the worker ready again", pod.ready, 60, every=0.5)
        time.sleep(10)  # long enough for a second, wrong restart to show
        starts = [l for l in pod.logs("manager") if "worker started: hub=" in l]
        assert len(starts) == 2, starts
        assert pod.restarts("manager") == 0
        assert pod.worker_hub() == b.cp.endpoint
        assert pod.events("BackOff") == []
        assert metric("kubeslice_worker_hub_worker_restarts_total", mode="in-place", outcome="verified") == 1
    else:
        wait_for("the worker restarted on B", lambda: pod.restarts("manager") >= 1 and pod.worker_hub() == b.cp.endpoint, 180, every=0.5)
        wait_for("the worker ready again", pod.ready, 60, every=0.5)
        time.sleep(10)  # long enough for a second, wrong restart to show
        assert pod.restarts("manager") == 1
        assert pod.worker_hub() == b.cp.endpoint
        # kubelet restarted it once, without backing off.
        assert pod.events("BackOff") == []
    assert pod.restarts("hub-follower") == 0
    # The story, on the pod, in order; `kubectl describe pod` shows it.
    story = ["HubSwitchPending", "HubSwitched", "WorkerRestarting"] + ([] if mode == "none" else ["WorkerRestarted"])
    reasons = wait_for("the Events on the pod", lambda: (r := [e["reason"] for e in pod.recorded()]) and all(x in r for x in story) and r, 30)
    assert collapse([r for r in reasons if r in story]) == story, reasons
    uid = pod.get()["metadata"]["uid"]
    assert all(e["regarding"]["uid"] == uid for e in pod.recorded())
    described = pod.describe()
    assert "HubSwitched" in described, described
    out = REPO / "target" / "k8s" / f"describe-{mode}-{'native' if native else 'classic'}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(described)


# In-place mode: the exec wrapper is the worker container's first process and runs the
# worker as its child.


def children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.parametrize("native", [True, False], ids=["native", "classic"])
def test_killing_the_sidecar_leaves_the_worker_alone(deploy, native):
    pod = deploy("signal", native)
    subprocess.run(["kill", "-9", str(pod.sidecar_pid())], check=True)
    wait_for("the sidecar restarted by kubelet", lambda: pod.restarts("hub-follower") == 1 and pod.ready(), 90, every=0.5)
    time.sleep(5)
    assert pod.restarts("manager") == 0
    published = [l for l in pod.logs("hub-follower") if "published the active hub" in l]
    assert published and '"reason":"resumed"' in published[-1], "the restarted sidecar did not resume the decision"


def test_a_native_sidecar_holds_the_worker_until_its_readyz_answers(deploy, hubs):
    # With both hubs frozen, no hub names the Active: the sidecar publishes the primary only
    # once defaultAfter has passed (rule 12), and /readyz answers 200 only then.
    for hub in hubs:
        hub.cp.apiserver.freeze()
    try:
        pod = deploy("signal", True, extra={"defaultAfter": "5s"}, wait_ready=False)
        wait_for("the sidecar running", lambda: "running" in pod.container("hub-follower").get("state", {}), 60, every=0.2)
        wait_for("the worker running", lambda: "running" in pod.container("manager").get("state", {}), 60, every=0.2)
    finally:
        for hub in hubs:
            hub.cp.apiserver.thaw()
    sidecar_started = datetime.fromisoformat(pod.container("hub-follower")["state"]["running"]["startedAt"].replace("Z", "+00:00")).timestamp()
    worker_started = datetime.fromisoformat(pod.container("manager")["state"]["running"]["startedAt"].replace("Z", "+00:00")).timestamp()
    # defaultAfter is 5 s: a worker started with the sidecar would be seconds early.
    assert worker_started - sidecar_started >= 5, (sidecar_started, worker_started)
    for hub in hubs:
        hub.cp.wait_ready()


ACTED = {"signal": "signalled the worker", "liveness": "failing /worker/livez so that kubelet restarts the worker",
         "in-place": "asking the exec wrapper to restart the worker in place"}


@pytest.mark.parametrize("mode", ["signal", "liveness", "restart-all", "in-place"])
def test_failover_latency_on_the_real_node(deploy, hubs, mode):
    """Promotion -> worker running on the new hub, at the chart's default timing. Each sample
    is a fresh pod, so each restart is its container's first: kubelet's back-off, which
    delays a container's later restarts, is not part of these numbers."""
    a, b = hubs
    samples = []
    for i in range(SAMPLES):
        for hub in hubs:
            hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
        # restart-all exists only on a native sidecar; the others alternate.
        pod = deploy(mode, mode == "restart-all" or i % 2 == 0)
        t0 = time.time()
        b.claim(b.cp.endpoint, B_ID)
        wait_for("the worker on B", lambda: pod.worker_hub() == b.cp.endpoint, 120, every=0.1)
        started = pod.worker_started_at()
        if mode == "restart-all":
            # The sidecar that decided is gone with its log; its Events stay.
            handoff = recorded_at(pod, "HubSwitched")
            acted = recorded_at(pod, "WorkerRestarting", "the sidecar exits")
        else:
            handoff = decided_at(pod)
            acted = logged_at(pod, ACTED[mode])
        samples.append({"total": started - t0, "decision": handoff - t0, "jitter": acted - handoff,
                        "kubelet": started - acted})
        if mode == "liveness":
            # The kubelet acted on the failing gate, before --liveness-fail-for reopened it.
            wait_for("the gate cleared by the worker's acknowledgement",
                     lambda: any("the worker acknowledged the current decision" in l and '"generation":2' in l
                                 for l in pod.logs("hub-follower")), 30)
            assert not any("unverified" in l for l in pod.logs("hub-follower"))
            assert [e for e in pod.events("Unhealthy") if "503" in e.get("message", "")], pod.events("Unhealthy")
        pod.delete()
    RESULTS.with_name(f"failover-latency-{mode}.json").write_text(json.dumps(samples, indent=1))
    for key in ("total", "decision", "jitter", "kubelet"):
        values = sorted(s[key] for s in samples)
        print(f"{mode} {key}: p50 {statistics.median(values):.2f}s max {values[-1]:.2f}s  {['%.2f' % v for v in values]}")
    # The restart jitter is drawn from 0..5s (the chart's default); the rest is kubelet's, or,
    # in place, the wrapper's: under 10 ms, less than the skew between the timestamps of two
    # containers' logs, which containerd stamps as it reads each one. A CI run saw -0.00 s.
    floor = -0.05 if mode == "in-place" else 0
    assert all(0 <= s["jitter"] <= 5.5 and s["kubelet"] > floor for s in samples), samples


def test_liveness_mode_restarts_a_hung_worker_through_its_own_probe(deploy, hubs):
    """The worker's own livenessProbe, handed to the sidecar, still restarts a hung worker,
    on the hub it was on, and keeps its tolerance. The stand-in hangs 5 s after its first
    start; its probe (no initial delay, every 5 s, threshold 3) gives a grace of
    (3-1)*5 - (3-1)*2 = 6 s, and the kubelet needs (3-1)*2 s more."""
    a, _ = hubs
    own = {"httpGet": {"path": "/healthz", "port": 8081}, "periodSeconds": 5, "initialDelaySeconds": None}
    pod = deploy("liveness", True, worker={"livenessProbe": own}, worker_env={"HUB_TEST_HANG_ONCE_AFTER": "5"})
    assert "initialDelaySeconds" not in next(c for c in pod.manifest["spec"]["containers"] if c["name"] == "manager")["livenessProbe"]
    wait_for("the hung worker restarted", lambda: pod.restarts("manager") == 1, 90, every=0.5)
    wait_for("the worker ready again", pod.ready, 60, every=0.5)
    assert pod.worker_hub() == a.cp.endpoint
    log = pod.logs("hub-follower")
    assert any("the worker's own liveness check failed" in l for l in log), log[-20:]
    assert any("/worker/livez fails for the worker's own health" in l and "answered 500" in l for l in log), log[-20:]
    # Not before its tolerance: hung at 5 s, 6 s of grace, 4 s of kubelet probes.
    ended = pod.container("manager")["lastState"]["terminated"]
    lived = parse_time(ended["finishedAt"]) - parse_time(ended["startedAt"])
    assert lived >= 5 + 6 + 4 - 1, ended
    assert pod.restarts("hub-follower") == 0
    # The new worker is healthy and judged afresh: no second restart over more than the
    # whole tolerance.
    time.sleep(20)
    assert pod.restarts("manager") == 1


def recorded_at(pod: Pod, reason: str, needle: str = "") -> float:
    """When hub-follower recorded its first Event of `reason` whose note has `needle`."""
    def find():
        for e in notes(pod, reason):
            if needle in e.get("note", ""):
                return datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
        return None
    return wait_for(f"a {reason} Event on {pod.name}", find, 30)


def decided_at(pod: Pod) -> float:
    """When the sidecar logged the published switch (kubelet's timestamp of the line)."""
    return logged_at(pod, "published the active hub", '"reason":"switch"')


def logged_at(pod: Pod, *needles: str) -> float:
    for line in pod.logs("hub-follower"):
        stamp, _, rest = line.partition(" ")
        if all(n in rest for n in needles):
            return parse_time(stamp)
    raise AssertionError(f"no {needles} in the sidecar's log:\n" + "\n".join(pod.logs("hub-follower")[-20:]))


# Restart-all mode (KEP-5532): the sidecar exits with the restart code and kubelet restarts
# every container of the pod in place. Needs the RestartAllContainersOnContainerExits gate on
# the API server and the kubelet (kube.py turns it on).

RESTART_ALL = "restart-all"


def sandboxes(pod: Pod) -> list[str]:
    """The pod's sandbox containers in containerd: one, the same one, for as long as the pod
    keeps its sandbox, its network and its volumes."""
    uid = pod.get()["metadata"]["uid"]
    out = subprocess.run(["ctr", "--address", str(NODE_SOCK[0]), "-n", "k8s.io", "containers", "ls", "-q",
                          f'labels."io.kubernetes.pod.uid"=={uid},labels."io.cri-containerd.kind"==sandbox'],
                         capture_output=True, text=True, check=True).stdout
    return sorted(out.split())


def restart_counts(pod: Pod) -> dict[str, int]:
    status = pod.get()["status"]
    return {c["name"]: c.get("restartCount", 0) for c in status.get("initContainerStatuses", []) + status.get("containerStatuses", [])}


def notes(pod: Pod, reason: str) -> list[dict[str, Any]]:
    """hub-follower's Events of `reason` on this pod: by UID, since earlier tests' pods had
    the same name."""
    uid = pod.get()["metadata"]["uid"]
    return [e for e in pod.recorded() if e["reason"] == reason and e["regarding"].get("uid") == uid]


def metric(name: str, **labels: str) -> float:
    """One sample of the sidecar's /metrics (host network: the pod's port on 127.0.0.1). A
    missing sample is a failure, not a zero."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:8095/metrics", timeout=5).read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            got = ",".join(sorted(line[len(name) + 1:line.index("}")].split(",")))
            if got == want:
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name}{{{want}}} in /metrics")


def test_restart_all_restarts_every_container_once_in_place_and_the_sidecar_resumes_without_acting(deploy, hubs):
    a, b = hubs
    pod = deploy(RESTART_ALL, True)
    assert pod.worker_hub() == a.cp.endpoint
    spec = pod.manifest["spec"]
    assert "shareProcessNamespace" not in spec
    sidecar = next(c for c in spec["initContainers"] if c["name"] == "hub-follower")
    assert sidecar["restartPolicyRules"] == [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]
    worker = next(c for c in spec["containers"] if c["name"] == "manager")
    assert "/worker/livez" not in json.dumps(worker.get("livenessProbe", {}))
    sandbox = sandboxes(pod)
    assert len(sandbox) == 1, sandbox
    before = restart_counts(pod)
    assert set(before.values()) == {0}, before

    b.claim(b.cp.endpoint, B_ID)
    wait_for("the worker on B", lambda: pod.worker_hub() == b.cp.endpoint, 120, every=0.5)
    wait_for("the pod ready again", pod.ready, 60, every=0.5)
    wait_for("the new sidecar verified the worker",
             lambda: any("the worker acknowledged the current decision" in l for l in pod.logs("hub-follower")), 60)
    time.sleep(10)  # long enough for a second, wrong restart to show
    # Every container, init containers included, exactly once; the sandbox is the same one.
    assert restart_counts(pod) == {name: 1 for name in before}, restart_counts(pod)
    assert sandboxes(pod) == sandbox
    log = pod.logs("hub-follower")
    # The emptyDir survived: the new sidecar read the restart request and resumed the decision.
    assert any("started after this sidecar exited to restart every container" in l for l in log), log[-20:]
    assert any("published the active hub" in l and '"reason":"resumed"' in l for l in log), log[-20:]
    assert not any("exiting so that kubelet restarts every container" in l for l in log), "the new sidecar acted again"
    assert metric("kubeslice_worker_hub_worker_restarts_total", mode=RESTART_ALL, outcome="verified") == 1
    assert pod.events("BackOff") == []
    story = ["HubSwitchPending", "HubSwitched", "WorkerRestarting", "WorkerRestarted"]
    uid = pod.get()["metadata"]["uid"]
    reasons = wait_for("the Events on the pod", lambda: (r := [e["reason"] for e in pod.recorded() if e["regarding"].get("uid") == uid])
                       and all(x in r for x in story) and r, 30)
    assert collapse([r for r in reasons if r in story]) == story, reasons
    restarting = [e["note"] for e in notes(pod, "WorkerRestarting")]
    assert len(restarting) == 2, restarting
    assert "the sidecar exits so that kubelet restarts every container" in restarting[0], restarting
    assert "kubelet restarted the pod's containers" in restarting[1], restarting
    (REPO / "target" / "k8s" / "describe-restart-all-native.txt").write_text(pod.describe())


def test_restart_all_two_promotions_close_together_restart_at_most_once_per_cooldown(deploy, hubs):
    a, b = hubs
    cooldown = 30
    pod = deploy(RESTART_ALL, True, extra={"restart": {"mode": RESTART_ALL, "jitter": "0s", "cooldown": f"{cooldown}s"}})
    b.claim(b.cp.endpoint, B_ID)
    wait_for("the worker on B", lambda: pod.worker_hub() == b.cp.endpoint, 120, every=0.5)
    # A promoted back at once: the sidecar that started after the first exit must wait out the
    # cooldown that exit began, although it is a new process.
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID)
    wait_for("the worker back on A", lambda: pod.worker_hub() == a.cp.endpoint, 180, every=0.5)
    wait_for("the pod ready again", pod.ready, 60, every=0.5)
    time.sleep(10)
    assert pod.restarts("manager") == 2
    exits = [datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
             for e in notes(pod, "WorkerRestarting") if "the sidecar exits" in e["note"]]
    assert len(exits) == 2, notes(pod, "WorkerRestarting")
    assert exits[1] - exits[0] >= cooldown - 0.5, exits


def test_restart_all_other_exits_restart_only_the_sidecar_and_a_switch_during_its_back_off_is_followed(deploy, hubs):
    a, b = hubs
    pod = deploy(RESTART_ALL, True)
    sidecar = lambda: pod.container("hub-follower")  # noqa: E731
    # Exit 0 (SIGTERM, an orderly stop), then 137 (SIGKILL): not the rule's code.
    subprocess.run(["kill", "-TERM", str(pod.sidecar_pid())], check=True)
    wait_for("the sidecar back after its exit 0", lambda: pod.restarts("hub-follower") == 1 and "running" in sidecar().get("state", {}), 60, every=0.2)
    assert sidecar()["lastState"]["terminated"]["exitCode"] == 0, sidecar()
    subprocess.run(["kill", "-KILL", str(pod.sidecar_pid())], check=True)
    # A second exit within seconds: kubelet backs off before it starts the sidecar again.
    wait_for("the sidecar in back-off", lambda: sidecar().get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff", 30, every=0.1)
    assert sidecar()["lastState"]["terminated"]["exitCode"] == 137, sidecar()
    assert pod.restarts("manager") == 0
    assert pod.worker_hub() == a.cp.endpoint
    # The promotion comes while no sidecar runs.
    b.claim(b.cp.endpoint, B_ID)
    promoted = time.time()
    wait_for("the sidecar back from its back-off", lambda: "running" in sidecar().get("state", {}), 120, every=0.1)
    down = time.time() - promoted
    wait_for("the worker on B", lambda: pod.worker_hub() == b.cp.endpoint, 240, every=0.5)
    wait_for("the pod ready again", pod.ready, 60, every=0.5)
    time.sleep(10)
    assert pod.restarts("manager") == 1
    on_b = pod.worker_started_at() - promoted
    # Reported: the switch says how old the claim it followed was, the time the sidecar was
    # not running included; the restarted sidecar says how long kubelet took after its exit.
    switched = notes(pod, "HubSwitched")
    assert len(switched) == 1, switched
    age = float(switched[0]["note"].split("its claim was written ")[1].split("s before")[0])
    assert down - 0.5 <= age <= on_b, (down, age, on_b, switched[0]["note"])
    reported = [e for e in notes(pod, "WorkerRestarting") if "kubelet restarted the pod's containers" in e["note"]]
    assert len(reported) == 1, notes(pod, "WorkerRestarting")
    print(f"promotion during the sidecar's back-off: it was down {down:.1f}s more; worker on B after {on_b:.1f}s; "
          f"the switch: {switched[0]['note']}; {reported[0]['type']}: {reported[0]['note']}")
    wait_for("the new sidecar verified the worker",
             lambda: any("the worker acknowledged the current decision" in l for l in pod.logs("hub-follower")), 60)


# --- Pin and drain: the pod's annotations, through the chart's downward-API volume ------------

# Quick reads and restarts, so that a walk through several moves fits in a few minutes.
STEERING = {"pollInterval": "2s", "probeTimeout": "1s", "restart": {"mode": "signal", "jitter": "1s", "cooldown": "5s"}}
WORKER_LABEL = {"control-plane": "controller-manager"}
RUNBOOK = "## Maintenance: drain a hub, upgrade it, bring it back"


def status() -> dict[str, Any]:
    """The sidecar's /status (host network: the pod's port on 127.0.0.1)."""
    import urllib.request
    return json.loads(urllib.request.urlopen("http://127.0.0.1:8095/status", timeout=5).read())


def annotate(pod: Pod, key: str, value: str | None) -> None:
    arg = f"hub-follower.kubeslice.io/{key}" + ("-" if value is None else f"={value}")
    pod.cp.kubectl("annotate", "pod", pod.name, "-n", NS, arg, "--overwrite")


def in_seconds(secs: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + secs))


def test_a_pin_waits_for_its_hub_survives_a_sidecar_restart_refuses_a_bad_value_and_ends_by_itself_on_the_real_node(deploy, hubs):
    a, b = hubs
    pod = deploy("signal", True, extra=STEERING)
    assert pod.worker_hub() == a.cp.endpoint
    # Pinned to B while B does not answer: the worker stays on A, and the pod says why.
    b.cp.apiserver.freeze()
    try:
        annotate(pod, "pin", f"secondary until {in_seconds(600)}")
        wait_for("HubPinned on the pod", lambda: notes(pod, "HubPinned"), 90)
        wait_for("the pin held", lambda: status()["held"] and status()["held"]["reason"] == "pinned_hub_unreachable", 60)
        held = [e["note"] for e in notes(pod, "HubSwitchHeld")]
        assert any("pinned, but its reads fail" in n for n in held), held
        assert pod.restarts("manager") == 0
    finally:
        b.cp.apiserver.thaw()
    # B answers: the move is confirmed like any switch, and the worker restarted onto B once.
    wait_for("the worker restarted on B", lambda: pod.restarts("manager") == 1 and pod.worker_hub() == b.cp.endpoint, 120, every=0.5)
    switched = [e["note"] for e in notes(pod, "HubSwitched")]
    assert len(switched) == 1 and "(pin of secondary until" in switched[0], switched
    assert metric("kubeslice_worker_hub_override_until_timestamp_seconds", hub="secondary", kind="pin") > time.time()

    # The sidecar dies mid-pin: kubelet starts it again, it reads the annotation again and
    # resumes its decision. The worker is not restarted.
    subprocess.run(["kill", "-9", str(pod.sidecar_pid())], check=True)
    wait_for("the sidecar restarted by kubelet", lambda: pod.restarts("hub-follower") == 1 and pod.ready(), 90, every=0.5)
    wait_for("the pin in effect again", lambda: (status()["overrides"]["pin"] or {}).get("hub") == "secondary", 60)
    assert status()["published"]["reason"] == "resumed" and status()["published"]["hub"] == "secondary"
    time.sleep(10)  # five reads: long enough for a wrong move to start
    assert pod.restarts("manager") == 1 and status()["published"]["reason"] == "resumed"

    # A typo while editing: refused on the pod, the pin in effect stays, nothing moves.
    annotate(pod, "pin", "secondary until tomorrow")
    wait_for("HubOverrideRefused on the pod", lambda: notes(pod, "HubOverrideRefused"), 90)
    refused = notes(pod, "HubOverrideRefused")[0]
    assert refused["type"] == "Warning" and "malformed" in refused["note"], refused
    assert metric("kubeslice_worker_hub_override_refused", kind="pin") == 1
    s = status()
    assert s["overrides"]["pin"]["hub"] == "secondary" and s["overrides"]["refused"]["pin"]["reason"] == "malformed", s

    # A short pin replaces it and ends by itself; the claims, which name A, take the worker back.
    short = f"secondary until {in_seconds(60)}"
    annotate(pod, "pin", short)
    wait_for("the short pin in effect", lambda: status()["overrides"]["pin"] and status()["overrides"]["pin"]["value"] == short, 90)
    wait_for("HubPinEnded (replaced)", lambda: any("(replaced)" in e["note"] for e in notes(pod, "HubPinEnded")), 30)
    wait_for("the pin expired", lambda: any("(expired)" in e["note"] for e in notes(pod, "HubPinEnded")), 120)
    wait_for("the worker restarted on A", lambda: pod.restarts("manager") == 2 and pod.worker_hub() == a.cp.endpoint, 120, every=0.5)
    assert metric("kubeslice_worker_hub_override_until_timestamp_seconds", hub="secondary", kind="pin") == 0
    assert metric("kubeslice_worker_hub_override_refused", kind="pin") == 0
    assert pod.restarts("hub-follower") == 1


def runbook_blocks() -> list[str]:
    """The `sh` blocks of the runbook in docs/operations.md, in order."""
    text = (REPO / "docs" / "operations.md").read_text()
    assert RUNBOOK in text, f"docs/operations.md has no section {RUNBOOK!r}"
    section = text.split(RUNBOOK, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


class Shell:
    """Runs blocks one after another as one operator's shell would: the variables and
    functions a block defines are there for the next one."""

    def __init__(self, kubeconfig: Path, state: Path):
        self.state = state
        state.write_text("")
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig)}

    def run(self, block: str) -> str:
        # allexport: what a block assigns is exported, and so saved for the next one.
        script = f"set -a\nsource {self.state}\nset -euo pipefail\n{block}\n{{ export -p; declare -f; }} > {self.state}\n"
        r = subprocess.run(["bash", "-c", script], env=self.env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"the runbook's block failed ({r.returncode}):\n{block}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return r.stdout


def runbook_kubeconfig(path: Path, worker: Any, hubs: Any) -> Path:
    """An operator's kubeconfig: the worker cluster as the current context, and each hub
    under the context the runbook names (`hub-1` for A, `hub-2` for B)."""
    entries = [("worker", worker), ("hub-1", hubs[0].cp), ("hub-2", hubs[1].cp)]
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "worker",
        "clusters": [{"name": n, "cluster": {"server": cp.endpoint, "certificate-authority": str(cp.pki.ca_crt)}}
                     for n, cp in entries],
        "users": [{"name": n, "user": {"client-certificate": str(cp.admin[0]), "client-key": str(cp.admin[1])}}
                  for n, cp in entries],
        "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n, cp in entries],
    }))
    return path


def status_line(out: str) -> dict[str, Any]:
    """The runbook's `status`: the last line a block printed."""
    return json.loads(out.strip().splitlines()[-1])


def test_the_maintenance_runbook(deploy, hubs, node, tmp_path):
    """docs/operations.md's runbook, block by block, on the real node with real hubs. What the
    runbook leaves to other tools (the controller's failover, the upgrade itself) is done here
    the way those tools would leave the hubs."""
    a, b = hubs
    pod = deploy("signal", True, extra=STEERING, labels=WORKER_LABEL)
    blocks = runbook_blocks()
    assert len(blocks) == 7, f"the runbook's sh blocks changed ({len(blocks)}): walk the new ones here"
    sh = Shell(runbook_kubeconfig(tmp_path / "operator.kubeconfig", node.cp, hubs), tmp_path / "runbook.state")

    # 1. Before. The block's "yours" line, as this operator sets it: the hubs' project
    # namespace and the cluster are the test hubs' own.
    before = status_line(sh.run(blocks[0]))
    sh.run(f"PROJECT_NS={a.namespace} CLUSTER={a.cluster}")
    assert before["hub"] == "primary" and before["drain"] is None, before
    assert before["verdicts"] == {"primary": "claim", "secondary": "claim"}, before

    # 2. The Active controller moves to B (its own procedure; here, the claims it leaves).
    for hub in hubs:
        hub.claim(b.cp.endpoint, B_ID)
    wait_for("the worker restarted on B", lambda: pod.restarts("manager") == 1 and pod.worker_hub() == b.cp.endpoint, 120, every=0.5)
    wait_for("WorkerRestarted on the pod", lambda: notes(pod, "WorkerRestarted"), 60)
    out = sh.run(blocks[1])
    assert "HubSwitched" in out and "WorkerRestarted" in out, out
    assert status_line(out)["hub"] == "secondary"

    # 3. Drain A.
    sh.run(blocks[2])
    wait_for("HubDrained on the pod", lambda: notes(pod, "HubDrained"), 90)
    out = sh.run(blocks[3])
    assert "HubDrained" in out and "HubOverrideRefused" not in out, out
    drained = status_line(out)
    assert drained["drain"] == "primary" and drained["hub"] == "secondary", drained
    assert metric("kubeslice_worker_hub_override_until_timestamp_seconds", hub="primary", kind="drain") > time.time()

    # 4. A is upgraded: its API server goes away and comes back, and a controller starting on
    # A claims A, fresher than anything so far (a split brain). Drained, A has no say.
    a.cp.restart_apiserver()
    a.claim(a.cp.endpoint, A_ID)
    wait_for("A's claim read", lambda: (status()["hubs"]["primary"].get("claim") or {}).get("endpoint") == a.cp.endpoint, 60)
    time.sleep(10)  # five reads: long enough for a wrong move to start
    assert pod.restarts("manager") == 1 and status()["published"]["hub"] == "secondary"
    pending = [e["note"] for e in notes(pod, "HubSwitchPending")]
    assert not any("switch to the primary hub" in n for n in pending), pending

    # 5. A checked; its controller is Standby, so its claim names B.
    a.claim(b.cp.endpoint, B_ID)
    wait_for("A mirrors B", lambda: (status()["hubs"]["primary"].get("claim") or {}).get("endpoint") == b.cp.endpoint, 60)
    out = sh.run(blocks[4])
    assert f"hub-1 claims: {b.cp.endpoint}" in out, out
    checked = status_line(out)
    assert checked["verdicts"]["primary"] == "claim" and checked["drain"] == "primary", checked

    # 6. Bring A back.
    sh.run(blocks[5])
    wait_for("HubDrainEnded on the pod", lambda: notes(pod, "HubDrainEnded"), 90)
    out = sh.run(blocks[6])
    assert "HubDrainEnded" in out and "(removed)" in out, out
    back = status_line(out)
    assert back["drain"] is None and back["ended"]["drain"]["how"] == "removed" and back["hub"] == "secondary", back
    assert metric("kubeslice_worker_hub_override_until_timestamp_seconds", hub="primary", kind="drain") == 0
    # The claims decide again: the controller's own failback moves the worker to A.
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID)
    wait_for("the worker restarted on A", lambda: pod.restarts("manager") == 2 and pod.worker_hub() == a.cp.endpoint, 120, every=0.5)
    assert pod.restarts("hub-follower") == 0
