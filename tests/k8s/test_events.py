"""Events on the worker's Pod, recorded on a real kube-apiserver.

hub-follower runs as a process with in-cluster credentials (a service account token from
the TokenRequest API, mounted where a pod has it, in a mount namespace of its own). Hub A's
API server plays the worker's own cluster: the Events go there, in namespace `workers`, about
the Pod `worker-0`. The Role is the chart's, rendered with real Helm.
"""

from __future__ import annotations

import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from follower import Follower
from kube import KUBE_VERSION, REPO, collapse, now_rfc3339, wait_for, write_atomically

sys.path.insert(0, str(REPO / "tests" / "chart"))
import chartkit  # noqa: E402

A_ID, B_ID = "ctrl-a", "ctrl-b"
LONG_AGO = "2026-01-01T00:00:00Z"
NS = "workers"
POD = "worker-0"
QUICK = {"HUB_POLL_INTERVAL": "1s", "HUB_PROBE_TIMEOUT": "500ms", "HUB_CONFIRM_INTERVAL": "500ms"}


@pytest.fixture(scope="module")
def events_rbac(hubs, tmp_path_factory):
    """Namespace `workers` on hub A with two service accounts: `worker` bound to the chart's
    events Role, `stranger` bound to nothing."""
    a, _ = hubs
    import helm_python as helm

    with helm.Chart.load(chartkit.prepare_charts(tmp_path_factory.mktemp("charts"))) as chart:
        rendered = chartkit.render(chart, {}, kube_version=KUBE_VERSION)
    rbac = rendered.kind("Role") + rendered.kind("RoleBinding")
    assert len(rbac) == 2, "the chart renders the events RBAC by default"
    sa = rendered.kind("RoleBinding")[0]["subjects"][0]["name"]
    for d in rbac:
        d["metadata"]["namespace"] = NS
        for s in d.get("subjects", []):
            s["namespace"] = NS
    a.cp.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "stranger", "namespace": NS}},
        *rbac,
    )
    return sa


def incluster(dir: Path, hub, sa: str) -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    write_atomically(dir / "token", hub.cp.token(NS, sa))
    (dir / "ca.crt").write_bytes(hub.cp.pki.ca_crt.read_bytes())
    (dir / "namespace").write_text(NS)
    return dir


class Listener:
    """A TCP server on 127.0.0.1 that counts connections and never answers: an API server
    that hangs, or a tripwire for one that must not be called."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        for c in self.accepted:
            c.close()


@pytest.fixture
def start(tmp_path: Path, hubs):
    started: list[Follower] = []

    def _start(name: str, settings: dict[str, str], incluster_dir: Path | None, service: tuple[str, int] | None) -> Follower:
        a, b = hubs
        f = Follower(tmp_path / name, a, b, a.token(), b.token(), {**QUICK, **settings}, incluster=incluster_dir, service=service)
        started.append(f)
        return f.start()

    yield _start
    for f in started:
        f.stop()


def pod_events(hub, pod: str = POD) -> list[dict[str, Any]]:
    items = hub.cp.get("events.v1.events.k8s.io", "-n", NS)["items"]
    mine = [e for e in items if e.get("regarding", {}).get("name") == pod]
    return sorted(mine, key=lambda e: e.get("eventTime") or "")


def writes(events: list[dict[str, Any]], *reasons: str) -> int:
    """Requests that made these Events: a create each, and a patch per repeat in a series."""
    return sum((e.get("series") or {}).get("count", 1) for e in events if e["reason"] in reasons)


def test_a_failover_tells_its_story_on_the_pod(hubs, events_rbac, start, tmp_path):
    a, b = hubs
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
    creds = incluster(tmp_path / "sa", a, events_rbac)
    f = start("story", {"HUB_RESTART_MODE": "liveness", "HUB_RESTART_JITTER": "0s",
                        "POD_NAME": POD, "POD_NAMESPACE": NS, "POD_UID": "11111111-2222-3333-4444-555555555555"},
              creds, ("127.0.0.1", a.cp.port))
    wait_for("startup on A", lambda: f.published("primary", "startup"), 20)
    b.claim(b.cp.endpoint, B_ID)
    switched = wait_for("the switch to B", lambda: f.published("secondary", "switch"), 30)
    # The worker restarts onto B: the exec wrapper's acknowledgement, as a restarted worker writes it.
    write_atomically(f.handoff_dir / "worker-ack.json",
                     f'{{"generation": {switched["generation"]}, "pid": 1, "startedAt": "{now_rfc3339()}", "hub": "secondary"}}')
    story = ["HubSwitchPending", "HubSwitched", "WorkerRestarting", "WorkerRestarted"]
    events = wait_for("the story on the pod", lambda: (ev := pod_events(a)) and all(r in [e["reason"] for e in ev] for r in story) and ev, 30)
    reasons = [e["reason"] for e in events]
    assert collapse([r for r in reasons if r in story]) == story, reasons
    # Each Event keeps its own message: the second confirming read is not folded into the first.
    pending = [e["note"] for e in events if e["reason"] == "HubSwitchPending"]
    assert [n.split(": ")[1] for n in pending] == ["1 of 3 confirming reads", "2 of 3 confirming reads"], pending
    by = {e["reason"]: e for e in events}
    switched_note = by["HubSwitched"]["note"]
    for part in ("primary", "secondary", b.cp.endpoint, B_ID, f"generation {switched['generation']}", "3 confirming"):
        assert part in switched_note, switched_note
    assert "liveness" in by["WorkerRestarting"]["note"]
    for e in events:
        assert e["regarding"]["kind"] == "Pod" and e["regarding"]["namespace"] == NS
        assert e["regarding"]["uid"] == "11111111-2222-3333-4444-555555555555"
        assert e["reportingController"] == "hub-follower"
        # No credential ends up in an Event.
        assert a.token()[-40:] not in str(e) and b.token()[-40:] not in str(e)  # the signature, unique per token
    assert f.metric("kubeslice_worker_hub_events_failed_total") == 0


def test_a_flapping_hub_writes_a_handful_of_events_not_one_per_round(hubs, events_rbac, start, tmp_path):
    a, b = hubs
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
    pod = "worker-flap"
    creds = incluster(tmp_path / "sa", a, events_rbac)
    f = start("flap", {"HUB_RESTART_MODE": "none", "POD_NAME": pod, "POD_NAMESPACE": NS}, creds, ("127.0.0.1", a.cp.port))
    wait_for("startup on A", lambda: f.published("primary", "startup"), 20)
    rounds = lambda: f.metric("kubeslice_worker_hub_probe_duration_seconds_count", hub="secondary")  # noqa: E731
    start_rounds = rounds()
    try:
        # B's API server frozen and thawed in turn: down for a round, up for a round.
        while rounds() - start_rounds < 50:
            b.cp.apiserver.freeze()
            time.sleep(1.2)
            b.cp.apiserver.thaw()
            time.sleep(1.2)
    finally:
        b.cp.apiserver.thaw()
    b.cp.wait_ready()
    timeouts = f.metric("kubeslice_worker_hub_probe_errors_total", hub="secondary", reason="timeout")
    assert timeouts >= 10, f"B was not seen down often enough to flap ({timeouts} timeouts)"
    time.sleep(2)
    made = writes(pod_events(a, pod), "HubUnreachable", "HubRecovered")
    print(f"{rounds() - start_rounds:.0f} rounds, {timeouts:.0f} timeouts of B, {made} Event writes")
    assert 2 <= made <= 8, made


def test_a_refusing_or_hanging_api_server_delays_no_decision(hubs, events_rbac, start, tmp_path):
    """Four followers at once on the same hubs: Events recorded (ok), refused by RBAC (403),
    sent into an API server that never answers (hang), and off. Each promotion's time to the
    published switch is measured for each; the refusing and hanging ones must not be slower."""
    a, b = hubs
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
    hang, tripwire = Listener(), Listener()
    try:
        env = {"HUB_RESTART_MODE": "none", "POD_NAMESPACE": NS}
        followers = {
            "ok": start("ok", {**env, "POD_NAME": "worker-ok"}, incluster(tmp_path / "sa-ok", a, events_rbac), ("127.0.0.1", a.cp.port)),
            "403": start("forbidden", {**env, "POD_NAME": "worker-403"}, incluster(tmp_path / "sa-403", a, "stranger"), ("127.0.0.1", a.cp.port)),
            "hang": start("hang", {**env, "POD_NAME": "worker-hang"}, incluster(tmp_path / "sa-hang", a, events_rbac), ("127.0.0.1", hang.port)),
            "off": start("off", {**env, "POD_NAME": "worker-off", "HUB_EVENTS": "false"}, incluster(tmp_path / "sa-off", a, events_rbac), ("127.0.0.1", tripwire.port)),
        }
        for f in followers.values():
            wait_for("startup on A", lambda f=f: f.published("primary", "startup"), 20)
        took: dict[str, list[float]] = {k: [] for k in followers}
        for i in range(4):
            target, hub = (b, "secondary") if i % 2 == 0 else (a, "primary")
            for h in hubs:
                h.claim(target.cp.endpoint, f"ctrl-{i}")
            t0 = time.monotonic()
            pending = dict(followers)
            deadline = t0 + 30
            while pending and time.monotonic() < deadline:
                for k, f in list(pending.items()):
                    if f.published(hub, "switch"):
                        took[k].append(time.monotonic() - t0)
                        del pending[k]
                time.sleep(0.02)
            assert not pending, f"no switch to {hub} within 30 s: {list(pending)}"
        medians = {k: statistics.median(v) for k, v in took.items()}
        print("promotion -> switch published, median of 4 (s):", {k: round(v, 2) for k, v in medians.items()})
        assert medians["403"] <= medians["ok"] + 1.0 and medians["hang"] <= medians["ok"] + 1.0, medians
        # The refusals and the hang were counted as failures; nothing was recorded for them.
        wait_for("403s counted", lambda: followers["403"].metric("kubeslice_worker_hub_events_failed_total") >= 1, 20)
        wait_for("the hang counted", lambda: followers["hang"].metric("kubeslice_worker_hub_events_failed_total") >= 1, 20)
        assert pod_events(a, "worker-403") == []
        assert "could not record an Event" in followers["403"].log()
        assert writes(pod_events(a, "worker-ok"), "HubSwitched") >= 1
        # The hanging server was called; with --events false, nothing was.
        assert len(hang.accepted) >= 1
        assert tripwire.accepted == [], "--events false made a request"
        assert followers["off"].metric("kubeslice_worker_hub_events_failed_total") == 0
    finally:
        hang.close()
        tripwire.close()
