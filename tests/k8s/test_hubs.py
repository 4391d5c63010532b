"""hub-follower against two real kube-apiservers as hubs.

Each hub serves the Cluster CRD with status.activeController declared, and a Role that lets
the worker's service account read its Cluster object. Tokens are real service-account tokens
from the TokenRequest API; claims are written through the status subresource, as the
controller writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from follower import Follower, binary, check
from kube import ControlPlane, Hub, Pki, wait_for, write_atomically

A_ID, B_ID = "ctrl-a", "ctrl-b"
LONG_AGO = "2026-01-01T00:00:00Z"
# Fast enough that a test takes seconds, not minutes; the watch test uses the defaults.
QUICK = {"HUB_POLL_INTERVAL": "2s", "HUB_PROBE_TIMEOUT": "1s", "HUB_CONFIRM_INTERVAL": "500ms"}


@pytest.fixture
def claims_on_a(hubs):
    """Both hubs agree that A is Active, with an old lastUpdated, so any fresh claim wins."""
    a, b = hubs
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
    return hubs


@pytest.fixture
def start(tmp_path: Path, hubs):
    """Starts hub-follower processes; stops every one after the test, whatever happened."""
    started: list[Follower] = []

    def _start(settings: dict[str, str] | None = None, primary_token: str | None = None, secondary_token: str | None = None, name: str = "f") -> Follower:
        a, b = hubs
        f = Follower(tmp_path / name, a, b, primary_token or a.token(), secondary_token or b.token(), settings or {})
        started.append(f)
        return f.start()

    yield _start
    for f in started:
        f.stop()


def test_starts_on_the_hub_both_real_hubs_claim(hubs, start):
    a, b = hubs
    for hub in hubs:
        hub.claim(b.cp.endpoint, B_ID)
    f = start(QUICK)
    decision = wait_for("the startup decision", lambda: f.handoff(), 15)
    assert decision["hub"] == "secondary" and decision["reason"] == "startup"
    assert decision["identity"] == B_ID
    assert decision["endpoint"] == b.cp.endpoint
    # The real API server kept the declared status field: the claim came back whole.
    assert f.status()["hubs"]["primary"]["claim"]["identity"] == B_ID


def test_promotion_while_the_active_api_server_is_frozen(claims_on_a, start):
    a, b = claims_on_a
    f = start(QUICK)
    wait_for("startup on A", lambda: f.published("primary", "startup"), 15)
    a.cp.apiserver.freeze()
    try:
        b.claim(b.cp.endpoint, B_ID)
        switched = wait_for("the switch to B", lambda: f.published("secondary", "switch"), 30)
        assert switched["identity"] == B_ID
        # The frozen hub had no say: its reads ran into the deadline.
        assert f.status()["hubs"]["primary"]["reason"] == "timeout"
        assert f.metric("kubeslice_worker_hub_probe_errors_total", hub="primary", reason="timeout") >= 1
    finally:
        a.cp.apiserver.thaw()
    a.cp.wait_ready()


def test_a_403_from_rbac_is_counted_as_forbidden(claims_on_a, start):
    a, b = claims_on_a
    # "stranger" authenticates, but no RoleBinding lets it read Cluster objects.
    f = start(QUICK, secondary_token=b.token("stranger"))
    wait_for("startup on A", lambda: f.published("primary", "startup"), 15)
    wait_for("a forbidden read of B", lambda: f.metric("kubeslice_worker_hub_probe_errors_total", hub="secondary", reason="forbidden") >= 2, 15)
    secondary = f.status()["hubs"]["secondary"]
    assert secondary["reason"] == "forbidden"
    assert "403" in secondary["detail"]
    # The watch is refused by the same RBAC, and says so.
    wait_for("the watch's list refused", lambda: f.metric("kubeslice_worker_hub_watch_restarts_total", hub="secondary", reason="list_failed") >= 1, 15)
    assert f.metric("kubeslice_worker_hub_watch_up", hub="secondary") == 0
    # A forbidden hub has no say; nothing moves.
    assert f.published("primary", "startup")


def test_a_promotion_reaches_the_handoff_through_the_watch_well_before_the_next_poll(claims_on_a, start):
    a, b = claims_on_a
    f = start({})  # defaults: 10 s poll, 1 s confirm interval, 3 confirmations, watch on
    wait_for("startup on A", lambda: f.published("primary", "startup"), 20)
    wait_for("both watches up", lambda: f.metric("kubeslice_worker_hub_watch_up") == 2, 20)
    # Let the first poll round pass, so the promotion lands between polls: the next tick is
    # about 9 s away, and a switch by polling would take that plus two confirming reads.
    time.sleep(1)
    applies = f.metric("kubeslice_worker_hub_watch_events_total", lazy=True, hub="secondary", type="modified")
    t0 = time.monotonic()
    b.claim(b.cp.endpoint, B_ID)
    wait_for("the switch to B", lambda: f.published("secondary", "switch"), 30, every=0.02)
    elapsed = time.monotonic() - t0
    print(f"promotion -> handoff through the watch: {elapsed:.3f}s")
    # The watch saw the promotion, and the switch came in less than half the poll interval
    # (10 s): a ratio to the configured timing, not a bound on a busy machine's clock.
    assert f.metric("kubeslice_worker_hub_watch_events_total", hub="secondary", type="modified") > applies
    assert elapsed < 10 / 2, f"took {elapsed:.2f}s"


def test_a_rotated_token_file_is_used_from_the_next_round(claims_on_a, start, tmp_path):
    a, b = claims_on_a
    # Tokens bound to a Secret die with it: deleting the Secret revokes exactly that token.
    for name in ("token-1", "token-2"):
        b.cp.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": b.namespace}})
    old, new = b.token(bound_secret="token-1"), b.token(bound_secret="token-2")
    f = start(QUICK, secondary_token=old)
    # A second follower keeps the old token: it proves the revocation below is real.
    stale = start(QUICK, secondary_token=old, name="stale")
    wait_for("B answering with the old token", lambda: f.status()["hubs"]["secondary"]["verdict"] == "claim", 15)

    write_atomically(f.token_file("secondary"), new)
    time.sleep(2.5)  # more than a poll interval: the next round reads the new file
    b.cp.kubectl("delete", "secret", "token-1", "-n", b.namespace)
    wait_for("the old token to be refused", lambda: stale.metric("kubeslice_worker_hub_probe_errors_total", hub="secondary", reason="unauthorized") >= 1, 30)

    answered = f.metric("kubeslice_worker_hub_probe_duration_seconds_count", hub="secondary")
    wait_for("more rounds with the new token", lambda: f.metric("kubeslice_worker_hub_probe_duration_seconds_count", hub="secondary") >= answered + 3, 15)
    assert f.metric("kubeslice_worker_hub_probe_errors_total", hub="secondary", reason="unauthorized") == 0
    assert f.status()["hubs"]["secondary"]["verdict"] == "claim"


def test_the_watch_comes_back_after_an_api_server_restart(claims_on_a, start):
    a, b = claims_on_a
    # Two minutes between polls: a switch within seconds can only have come through the watch.
    f = start({"HUB_POLL_INTERVAL": "120s", "HUB_CONFIRM_INTERVAL": "500ms", "HUB_PROBE_TIMEOUT": "2s"})
    wait_for("startup on A", lambda: f.published("primary", "startup"), 20)
    wait_for("both watches up", lambda: f.metric("kubeslice_worker_hub_watch_up") == 2, 20)
    failures = f.metric("kubeslice_worker_hub_watch_restarts_total", lazy=True, hub="secondary")

    b.cp.restart_apiserver()
    wait_for("the watch to notice", lambda: f.metric("kubeslice_worker_hub_watch_restarts_total", hub="secondary") > failures, 30)
    wait_for("the watch up again", lambda: f.metric("kubeslice_worker_hub_watch_up", hub="secondary") == 1, 60, every=0.25)

    events = f.metric("kubeslice_worker_hub_watch_events_total", lazy=True, hub="secondary", type="modified")
    b.claim(b.cp.endpoint, B_ID)
    wait_for("the switch to B", lambda: f.published("secondary", "switch"), 20, every=0.05)
    assert f.metric("kubeslice_worker_hub_watch_events_total", hub="secondary", type="modified") > events


def test_a_frozen_hub_silences_its_watch_and_reads_resume(claims_on_a, start):
    """While both watches have heartbeats, the hubs are not read; a frozen hub's watch misses
    its end at timeoutSeconds, and reads come back at once."""
    a, b = claims_on_a
    # A 10 s watch: the API server ends it every 10 s, a heartbeat each time, where the
    # default 120 s watch gives one at least every 2 minutes.
    f = start({"HUB_POLL_INTERVAL": "1s", "HUB_PROBE_TIMEOUT": "500ms", "HUB_WATCH_TIMEOUT": "10s",
               "HUB_WATCHED_POLL_INTERVAL": "1h"})
    wait_for("startup on A", lambda: f.published("primary", "startup"), 20)
    wait_for("reads relaxed", lambda: f.metric("kubeslice_worker_hub_poll_interval_seconds") == 3600, 30, every=0.25)
    status = f.status()
    assert status["pollingRelaxed"] is True
    assert all(w["lastHeartbeatAt"] for w in status["watches"].values()), status["watches"]

    reads = f.metric("kubeslice_worker_hub_probe_duration_seconds_count")
    beat = f.status()["watches"]["secondary"]["lastHeartbeatAt"]
    # Two more heartbeats on B: about 20 s, twenty poll intervals.
    for _ in range(2):
        wait_for("a heartbeat from B", lambda: f.status()["watches"]["secondary"]["lastHeartbeatAt"] != beat, 15, every=0.25)
        beat = f.status()["watches"]["secondary"]["lastHeartbeatAt"]
    assert f.metric("kubeslice_worker_hub_probe_duration_seconds_count") == reads, "a hub was read while both watches vouched"

    b.cp.apiserver.freeze()
    try:
        frozen = time.monotonic()
        silent = lambda: f.metric("kubeslice_worker_hub_watch_restarts_total", lazy=True, hub="secondary", reason="silent")
        wait_for("B's watch found silent", lambda: silent() >= 1, 30, every=0.1)
        noticed = time.monotonic() - frozen
        # The watch in progress started at most 10 s before the freeze; it is silent 10 s
        # (--watch-timeout) plus 0.5 s (--probe-timeout) after its start.
        assert noticed <= 10.5 + 1, f"noticed after {noticed:.1f}s"
        # Set at the end of the round the silence started, which waits for B's read to time out.
        wait_for("reads back at 1 s", lambda: f.metric("kubeslice_worker_hub_poll_interval_seconds") == 1, 5, every=0.1)
        reads = f.metric("kubeslice_worker_hub_probe_duration_seconds_count", hub="primary")
        wait_for("reads of A every second", lambda: f.metric("kubeslice_worker_hub_probe_duration_seconds_count", hub="primary") >= reads + 3, 10)
        assert f.status()["hubs"]["secondary"]["reason"] == "timeout"
        assert f.published("primary", "startup")
    finally:
        b.cp.apiserver.thaw()
    b.cp.wait_ready()


@pytest.fixture(scope="module")
def hub_c(workdir: Path):
    """A third hub, for the N-hub test only: its own etcd, API server, CA and service-account
    key, like A and B. Stopped in every outcome."""
    cp = ControlPlane("hub-c", workdir / "hub-c", Pki(workdir / "hub-c" / "pki"))
    try:
        cp.start()
        yield Hub(cp).install()
    finally:
        cp.stop()


def test_a_promotion_of_a_third_listed_hub_is_followed(claims_on_a, hub_c, start, tmp_path):
    a, b = claims_on_a
    c = hub_c
    c.claim(a.cp.endpoint, A_ID, LONG_AGO)
    creds = tmp_path / "hub-c"
    creds.mkdir()
    write_atomically(creds / "token", c.token())
    (creds / "ca.crt").write_bytes(c.cp.pki.ca_crt.read_bytes())
    f = start({**QUICK, "HUB_HUBS": f"hub-c={c.cp.endpoint},token-file={creds / 'token'},ca-file={creds / 'ca.crt'}"})
    wait_for("startup on A", lambda: f.published("primary", "startup"), 15)
    wait_for("the third hub answering", lambda: f.status()["hubs"].get("hub-c", {}).get("verdict") == "claim", 15)
    wait_for("three watches up", lambda: f.metric("kubeslice_worker_hub_watch_up") == 3, 20)

    # C is promoted: its controller claims C, and B mirrors it; A, the old Active, is silent.
    for hub in (c, b):
        hub.claim(c.cp.endpoint, "ctrl-c")
    switched = wait_for("the switch to C", lambda: f.published("hub-c", "switch"), 30)
    assert switched["endpoint"] == c.cp.endpoint
    assert switched["identity"] == "ctrl-c"
    assert switched["tokenFile"] == str(creds / "token")
    assert f.metric("kubeslice_worker_hub_active", hub="hub-c") == 1
    assert f.metric("kubeslice_worker_hub_active", hub="primary") == 0
    assert f.metric("kubeslice_worker_hub_watch_events_total", hub="hub-c", type="modified") >= 1
    # C answered with the token the worker is handed: its own, from C's own signer.
    assert f.status()["hubs"]["hub-c"]["verdict"] == "claim"


def test_check_names_the_hub_whose_crd_drops_the_claim(hubs, workdir, tmp_path):
    """A hub serving the Cluster CRD as worker-operator v1.6.4 ships it, without
    status.activeController: the controller's write succeeds and the API server drops the
    field. `check` reads each hub's OpenAPI v3 document and names that hub."""
    a, _ = hubs
    root = workdir / "hub-upstream-crd"
    cp = ControlPlane("hub-upstream-crd", root, Pki(root / "pki")).start()
    try:
        c = Hub(cp).install(declare_claim=False)
        c.claim(c.cp.endpoint, "ctrl-c")
        assert "activeController" not in c.status(), "the upstream CRD kept the field"
        report = check(binary(), Follower(tmp_path / "f", a, c, a.token(), c.token()).env())
        fields = {h["hub"]: h.get("claimField") for h in report["hubs"]}
        assert fields == {"primary": "declared", "secondary": "not_declared"}, report
        dropped = [p for p in report.get("problems", []) if p["problem"] == "crd_drops_claim"]
        assert len(dropped) == 1 and "the secondary hub's Cluster CRD" in dropped[0]["fix"], report
    finally:
        cp.stop()


def test_check_says_what_each_hubs_credential_may_do_with_the_claim(claims_on_a, tmp_path):
    """`check` asks each hub, by SelfSubjectAccessReview, whether the credential the worker
    has there may get, list and watch its Cluster: a Role naming only that Cluster
    (resourceNames) is enough; one that grants `get` alone is `watch_forbidden`, naming the
    hub and what to grant, and `check` exits 1. Both hubs claim A, so no other problem is
    said."""
    a, b = claims_on_a
    ns = b.namespace

    def role(name: str, verbs: list[str]) -> list[dict]:
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": ns},
             "rules": [{"apiGroups": ["controller.kubeslice.io"], "resources": ["clusters"], "resourceNames": [b.cluster], "verbs": verbs}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]},
        ]

    b.cp.apply(*role("narrow", ["get", "list", "watch"]), *role("getter", ["get"]))

    def run(secondary_sa: str) -> tuple[int, dict]:
        env = Follower(tmp_path / secondary_sa, a, b, a.token(), b.token(secondary_sa)).env()
        r = subprocess.run([str(binary()), "check", "--output", "json"], env=env, capture_output=True, text=True, timeout=30)
        return r.returncode, json.loads(r.stdout)

    everything = {"get": True, "list": True, "watch": True}
    code, report = run("narrow")
    assert {h["hub"]: h.get("access") for h in report["hubs"]} == {"primary": everything, "secondary": everything}, report
    assert not [p for p in report.get("problems", []) if p["problem"] == "watch_forbidden"], report
    assert code == 0, report

    code, report = run("getter")
    assert {h["hub"]: h.get("access") for h in report["hubs"]} == {"primary": everything, "secondary": {"get": True, "list": False, "watch": False}}, report
    (problem,) = [p for p in report.get("problems", []) if p["problem"] == "watch_forbidden"]
    assert "the secondary hub" in problem["fix"] and "not list or watch it" in problem["fix"], problem
    assert code == 1, report


def test_an_active_shedding_the_sidecar_with_429s_keeps_it_beside_an_older_self_claim(hubs, start):
    """#46: the Active's API server refuses every request of the sidecar with 429 and
    Retry-After, as API Priority and Fairness sheds a flow, for twice --dead-hub-after, while
    the demoted hub still holds an older claim for itself. A hub that answers is alive (rule
    10 counts only one that does not answer at all): the basis stands, and nothing moves. Until
    #46, a 429 counted as silence, and the older self-claim took the worker after the bound.
    HUB_FOLLOWER_K8S_TIMES=upstream sheds for 4 minutes with every bound at its default
    (--dead-hub-after 3m); otherwise for twice a --dead-hub-after of 15 s."""
    from shedding import Shedding

    a, b = hubs
    if os.environ.get("HUB_FOLLOWER_K8S_TIMES", "compressed") == "upstream":
        env, poll, shed = {}, 10, 240
    else:
        env, poll, shed = {**QUICK, "HUB_DEAD_HUB_AFTER": "15s", "HUB_SPLIT_BRAIN_WINDOW": "15s"}, 2, 2 * 15 + 5
    with Shedding(a) as proxy:
        a.claim(proxy.endpoint, A_ID)
        b.claim(b.cp.endpoint, B_ID, LONG_AGO)
        f = start({**env, "HUB_HOST_ENDPOINT": proxy.endpoint})
        first = wait_for("the startup decision", f.handoff, 15)
        assert (first["hub"], first["reason"]) == ("primary", "startup"), first
        wait_for("A's watch up through the proxy", lambda: f.metric("kubeslice_worker_hub_watch_up", hub="primary") == 1, 15)

        proxy.shed(True)
        wait_for("A's reads refused with 429", lambda: (lambda v: v.get("reason") == "server" and "429" in v.get("detail", ""))(
            f.status()["hubs"]["primary"]), 3 * poll + 10, every=0.2)
        deadline = time.monotonic() + shed
        while time.monotonic() < deadline:
            h = f.handoff()
            assert h is not None and (h["hub"], h["generation"]) == ("primary", first["generation"]), \
                f"moved while A shed load, {deadline - time.monotonic():.0f}s before the end: {h}"
            time.sleep(0.5)
        # Every request got the 429: reads every --poll-interval after each Retry-After, and
        # the watch's retries.
        assert proxy.refused >= shed / poll, f"only {proxy.refused} requests refused in {shed}s"
        print(f"A refused {proxy.refused} requests with 429 in {shed}s; the worker stayed on A")
        assert f.metric("kubeslice_worker_hub_switches_total") == 0

        proxy.shed(False)
        wait_for("A read again", lambda: f.status()["hubs"]["primary"].get("claim") is not None, 2 * poll + 10, every=0.5)
        assert f.handoff()["generation"] == first["generation"]
