"""Liveness mode: the worker's livenessProbe period and threshold are derived from
restart.livenessFailFor so that the kubelet sees the failing gate in time."""

from __future__ import annotations

import re

import pytest

import chartkit
from chartkit import env

UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def seconds(duration: str) -> float:
    return sum(int(n) * UNIT_MS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h)", duration)) / 1000


@pytest.mark.parametrize("fail_for", ["10s", "30s", "90s", "1m30s", "2m", "5m", "90500ms"])
@pytest.mark.parametrize("threshold", [1, 3, 5])
def test_kubelet_restarts_the_worker_inside_the_fail_for_window(chart, fail_for, threshold):
    r = chartkit.render(
        chart,
        chartkit.hf(restart={"mode": "liveness", "livenessFailFor": fail_for, "livenessFailureThreshold": threshold}),
    )
    chartkit.validate_k8s(r.deployment)
    probe = r.worker["livenessProbe"]
    period, failures, timeout = probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]
    assert failures == threshold
    assert period >= 1
    # Worst case: the first failing probe lands one period after the gate closes,
    # then `failures` probes, the last one taking its full timeout; one period spare.
    assert failures * period + timeout + period <= seconds(fail_for)
    # ...and not needlessly eager: one more second of period would break the bound.
    assert failures * (period + 1) + timeout + (period + 1) > seconds(fail_for)
    assert env(r.sidecar)["HUB_LIVENESS_FAIL_FOR"] == fail_for


def test_defaults_give_the_documented_timing(chart):
    r = chartkit.render(chart, chartkit.hf(restart={"mode": "liveness"}))
    probe = r.worker["livenessProbe"]
    assert (probe["periodSeconds"], probe["failureThreshold"], probe["timeoutSeconds"]) == (22, 3, 1)
    assert "periodSeconds = floor((F - timeoutSeconds) / (T + 1))" in chartkit.DOCS.read_text()


def test_fail_for_too_short_for_the_threshold_is_refused(chart):
    message = chartkit.render_error(
        chart, chartkit.hf(restart={"mode": "liveness", "livenessFailFor": "4s", "livenessFailureThreshold": 3})
    )
    assert "hubFollower.restart.livenessFailFor" in message
    assert "5s" in message


@pytest.mark.parametrize("mode", ["signal", "none"])
def test_liveness_fail_for_is_passed_in_every_mode(chart, mode):
    # In signal mode it bounds verification after not_found or permission_denied, so
    # the value must reach the sidecar there too, not only the binary's default.
    r = chartkit.render(chart, chartkit.hf(restart={"mode": mode, "livenessFailFor": "2m"}))
    assert env(r.sidecar)["HUB_LIVENESS_FAIL_FOR"] == "2m"
    # ...while the worker keeps its own livenessProbe.
    assert r.worker["livenessProbe"]["httpGet"]["path"] == "/healthz"
