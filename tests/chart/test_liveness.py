"""Liveness mode: the worker's livenessProbe points at the sidecar's /worker/livez, its
own probe is handed to the sidecar, and the timing lets the kubelet see a closed gate in
time (docs/helm.md, "Liveness mode")."""

from __future__ import annotations

import re

import pytest

import chartkit
from chartkit import env

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def seconds(duration: str) -> float:
    return sum(int(n) * UNIT_MS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", duration)) / 1000


def liveness(worker_probe=None, **restart):
    values = chartkit.hf(restart={"mode": "liveness", **restart})
    if worker_probe is not None:
        # Helm merges values into the example's defaults: null what the new probe lacks.
        cleared = {k: None for k in ("httpGet", "initialDelaySeconds", "periodSeconds")}
        values["worker"] = {"livenessProbe": {**cleared, **worker_probe}}
    return values


@pytest.mark.parametrize("fail_for", ["10s", "30s", "90s", "1m30s", "5m", "90500ms"])
@pytest.mark.parametrize("threshold,period", [(1, 1), (3, 2), (5, 3), (3, 10)])
def test_kubelet_restarts_the_worker_inside_the_fail_for_window(chart, fail_for, threshold, period):
    values = liveness(livenessFailFor=fail_for, livenessFailureThreshold=threshold, livenessPeriodSeconds=period)
    timeout = 2  # the example worker's probe has the default 1 s, plus one for the hop
    if threshold * period + timeout + period > seconds(fail_for):
        message = chartkit.render_error(chart, values)
        assert "hubFollower.restart.livenessFailFor" in message and "too short" in message, message
        return
    r = chartkit.render(chart, values)
    chartkit.validate_k8s(r.deployment)
    probe = r.worker["livenessProbe"]
    assert (probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]) == (period, threshold, timeout)
    assert env(r.sidecar)["HUB_LIVENESS_FAIL_FOR"] == fail_for


def test_defaults_give_the_documented_timing(chart):
    r = chartkit.render(chart, liveness())
    probe = r.worker["livenessProbe"]
    assert probe["httpGet"] == {"path": "/worker/livez", "port": 8095}
    assert (probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]) == (2, 3, 2)
    # The worker's own initialDelaySeconds (15 in the example chart) stays.
    assert probe["initialDelaySeconds"] == 15
    docs = chartkit.DOCS.read_text()
    assert "T·P + timeoutSeconds + P ≤ F" in docs
    assert "(T0 − 1)·P0 − (T − 1)·P" in docs


def test_the_worker_s_own_http_probe_is_handed_to_the_sidecar_with_its_tolerance(chart):
    r = chartkit.render(chart, liveness())
    e = env(r.sidecar)
    # The example worker: httpGet /healthz on 8081, periodSeconds 20, failureThreshold 3
    # (default), timeoutSeconds 1 (default). Kubelet restarted it 40 s after its first
    # failure; the sidecar waits 40 - (3-1)*2 = 36 s, and kubelet's probe 2 periods more.
    assert e["HUB_WORKER_PROBE"] == "http://127.0.0.1:8081/healthz"
    assert e["HUB_WORKER_PROBE_TIMEOUT"] == "1s"
    assert e["HUB_WORKER_PROBE_GRACE"] == "36s"


@pytest.mark.parametrize(
    "own,target,grace",
    [
        ({"tcpSocket": {"port": 9443}, "periodSeconds": 5, "failureThreshold": 6}, "tcp://127.0.0.1:9443", "21s"),
        ({"httpGet": {"path": "live", "port": "probes", "host": "::1", "scheme": "HTTP"}}, "http://[::1]:8081/live", "16s"),
        ({"httpGet": {"port": 8081, "path": ""}, "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 4}, "http://127.0.0.1:8081/", "0s"),
    ],
    ids=["tcp", "named-port-ipv6", "eager"],
)
def test_other_probe_shapes_are_handed_over(chart, own, target, grace):
    r = chartkit.render(chart, liveness(own))
    e = env(r.sidecar)
    assert (e["HUB_WORKER_PROBE"], e["HUB_WORKER_PROBE_GRACE"]) == (target, grace)
    assert e["HUB_WORKER_PROBE_TIMEOUT"] == f"{own.get('timeoutSeconds', 1)}s"
    assert r.worker["livenessProbe"]["timeoutSeconds"] == own.get("timeoutSeconds", 1) + 1


@pytest.mark.parametrize(
    "own,fragment",
    [
        ({"exec": {"command": ["/healthcheck"]}}, "livenessProbe of kind exec"),
        ({"grpc": {"port": 9000}}, "livenessProbe of kind grpc"),
        ({"httpGet": {"port": 8443, "path": "/healthz", "scheme": "HTTPS"}}, "uses scheme HTTPS"),
        ({"httpGet": {"port": 8081, "httpHeaders": [{"name": "X", "value": "y"}]}}, "sets httpHeaders"),
        ({"httpGet": {"port": "nope"}}, 'uses the port "nope"'),
    ],
    ids=["exec", "grpc", "https", "headers", "unknown-port"],
)
def test_probes_the_sidecar_cannot_run_are_refused(chart, own, fragment):
    message = chartkit.render_error(chart, liveness(own))
    assert "hubFollower.restart.mode" in message and fragment in message, message
    assert ("restart.mode=signal" in message) != ("port" in fragment), message


def test_a_worker_without_a_liveness_probe_gets_only_the_gate(chart):
    values = liveness()
    values["worker"] = {"livenessProbe": None}
    r = chartkit.render(chart, values)
    assert not any(k.startswith("HUB_WORKER_PROBE") for k in env(r.sidecar))
    probe = r.worker["livenessProbe"]
    assert probe["timeoutSeconds"] == 1 and "initialDelaySeconds" not in probe


def test_fail_for_too_short_for_the_probe_is_refused(chart):
    message = chartkit.render_error(chart, liveness(livenessFailFor="9s"))
    assert "hubFollower.restart.livenessFailFor" in message
    assert "at least 10s" in message


@pytest.mark.parametrize("mode", ["signal", "none", "restart-all"])
def test_other_modes_keep_the_worker_s_own_probe(chart, mode):
    # In signal mode livenessFailFor bounds verification after not_found or
    # permission_denied, so the value reaches the sidecar there too.
    r = chartkit.render(chart, chartkit.hf(restart={"mode": mode, "livenessFailFor": "2m"}))
    assert env(r.sidecar)["HUB_LIVENESS_FAIL_FOR"] == "2m"
    assert not any(k.startswith("HUB_WORKER_PROBE") for k in env(r.sidecar))
    assert r.worker["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_without_the_exec_wrapper_nothing_is_handed_over(chart):
    # The sidecar judges the worker process the wrapper acknowledges; without acknowledgements
    # the worker's own liveness is the gate's alone.
    r = chartkit.render(chart, chartkit.hf(restart={"mode": "liveness"}, execWrapper=False))
    assert not any(k.startswith("HUB_WORKER_PROBE") for k in env(r.sidecar))
    assert r.worker["livenessProbe"]["httpGet"]["path"] == "/worker/livez"


@pytest.mark.parametrize("native", [True, False])
def test_a_regular_sidecar_gets_a_startup_probe_that_waits_as_long_as_the_wrapper(chart, native):
    r = chartkit.render(chart, chartkit.hf(restart={"mode": "liveness"}, nativeSidecar=native, exec={"wait": "2m"}))
    if native:
        assert "startupProbe" not in r.worker
        return
    startup = r.worker["startupProbe"]
    assert startup["httpGet"] == {"path": "/worker/livez", "port": 8095}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120
    chartkit.validate_k8s(r.deployment)
