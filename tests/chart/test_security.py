"""Who the sidecar runs as, and the one capability it may get."""

from __future__ import annotations

import pytest

import chartkit


def sc(chart, **values):
    r = chartkit.render(chart, chartkit.hf(**values))
    chartkit.validate_k8s(r.deployment)
    return r, r.sidecar["securityContext"]


def fixture_sc(worker_chart, **values):
    """The kubeslice-worker-shaped fixture, whose manager sets no runAsUser."""
    r = chartkit.render(worker_chart, chartkit.hf(enabled=True, secondary=SECONDARY, **values))
    chartkit.validate_k8s(r.deployment)
    return r, r.sidecar["securityContext"]


SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}


def test_signal_mode_runs_as_the_configured_worker_uid_without_capabilities(worker_chart):
    r, ctx = fixture_sc(worker_chart, restart={"mode": "signal", "workerUID": 1001})
    assert ctx["runAsUser"] == 1001
    assert ctx["runAsNonRoot"] is True
    # Same-UID processes may signal each other: nothing to add.
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert r.pod["shareProcessNamespace"] is True
    # The worker sets no runAsUser, so it gets workerUID: same UID by construction.
    assert r.worker["securityContext"] == {"allowPrivilegeEscalation": False, "runAsUser": 1001}


def test_the_workers_own_uid_wins_over_worker_uid(chart):
    # The example's manager runs as 65532 explicitly; restart.workerUID is then unused.
    r, ctx = sc(chart, restart={"mode": "signal", "workerUID": 1001})
    assert ctx["runAsUser"] == r.worker["securityContext"]["runAsUser"] == 65532


@pytest.mark.parametrize("mode", ["liveness", "none", "restart-all"])
def test_worker_uid_is_left_alone_outside_signal_mode(worker_chart, mode):
    r, _ = fixture_sc(worker_chart, restart={"mode": mode, "workerUID": 1001})
    assert r.worker["securityContext"] == {"allowPrivilegeEscalation": False}


def test_signal_mode_as_root_adds_only_kill(chart):
    _, ctx = sc(chart, restart={"mode": "signal", "workerUID": 65532}, securityContext={"runAsUser": 0})
    assert ctx["runAsUser"] == 0
    assert ctx["runAsNonRoot"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"], "add": ["KILL"]}
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["readOnlyRootFilesystem"] is True


def test_root_worker_is_followed_by_uid_not_by_capability(worker_chart):
    _, ctx = fixture_sc(worker_chart, restart={"mode": "signal", "workerUID": 0})
    assert ctx["runAsUser"] == 0
    assert ctx["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("mode", ["liveness", "none", "restart-all"])
def test_other_modes_never_get_kill_nor_the_worker_uid(chart, mode):
    r, ctx = sc(chart, restart={"mode": mode, "workerUID": 1001})
    assert ctx["runAsUser"] == 65532
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert "shareProcessNamespace" not in r.pod


def test_explicit_sidecar_uid_is_honoured_outside_signal_mode(chart):
    _, ctx = sc(chart, restart={"mode": "liveness"}, securityContext={"runAsUser": 2000, "runAsGroup": 2000})
    assert (ctx["runAsUser"], ctx["runAsGroup"]) == (2000, 2000)


def test_installer_never_runs_as_root(worker_chart):
    r, _ = fixture_sc(worker_chart, restart={"mode": "signal", "workerUID": 0})
    ictx = r.installer["securityContext"]
    assert ictx["runAsUser"] != 0 and ictx["runAsNonRoot"] is True
    assert ictx["capabilities"] == {"drop": ["ALL"]}


SECURITY_MD = chartkit.REPO / "SECURITY.md"


def security_section(title: str) -> str:
    text = SECURITY_MD.read_text()
    start = text.index(f"\n### {title}\n")
    return text[start:text.index("\n## ", start)]


def test_security_md_says_what_the_pods_token_is_used_for(worker_chart):
    # SECURITY.md: the sidecar shares the pod's service-account token, uses it for
    # Events only, and none of it with events.enabled: false. The chart bears it out.
    section = security_section("The pod's service-account token")
    for claim in ("same Kubernetes identity", "create and patch Events", "events.enabled: false",
                  "does not use the pod's token", "HUB_EVENTS=false", "no\nRBAC"):
        assert claim in section, claim
    on = chartkit.render(worker_chart, chartkit.hf(enabled=True, secondary=SECONDARY))
    env = chartkit.env(on.sidecar)
    assert env["HUB_EVENTS"] == "true"
    # The only RBAC of the wrap: create and patch on events, for the pod's own account.
    (role,) = [d for d in on.kind("Role") if d["metadata"]["name"].endswith("-hub-follower-events")]
    assert role["rules"] == [{"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}]
    (binding,) = [d for d in on.kind("RoleBinding") if d["metadata"]["name"] == role["metadata"]["name"]]
    assert [s["name"] for s in binding["subjects"]] == [on.pod["serviceAccountName"]]
    # No account of its own: the pod's.
    assert "serviceAccountName" not in on.sidecar and on.kind("ServiceAccount") == []
    off = chartkit.render(worker_chart, chartkit.hf(enabled=True, secondary=SECONDARY, events={"enabled": False}))
    env = chartkit.env(off.sidecar)
    assert env["HUB_EVENTS"] == "false"
    assert not {"POD_NAME", "POD_NAMESPACE", "POD_UID"} & set(env)
    assert [d for d in off.docs if d["kind"] in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")] == []
