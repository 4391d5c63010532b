"""charts/hub-follower/patches/kubeslice-worker-1.3.1.patch against the real
kubeslice-worker 1.3.1 chart (tests/chart/fixtures/kubeslice-worker-1.3.1, copied from
kubeslice/kubeslice): it applies with `patch -p1`, it changes nothing while
hubFollower.enabled is false, and with it on the operator Deployment gets the sidecar.
Also what that chart's own RBAC already grants the pod for Events."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import helm_python as helm
import pytest
import yaml

import chartkit

UPSTREAM = Path(__file__).resolve().parent / "fixtures" / "kubeslice-worker-1.3.1"
PATCH = chartkit.LIBRARY / "patches" / "kubeslice-worker-1.3.1.patch"

# What a user sets on the real chart anyway: the cluster and the primary hub's credential.
BASE = {
    "cluster": {"name": "worker-1", "endpoint": "https://10.1.0.10:6443"},
    "controllerSecret": {"namespace": "a3ViZXNsaWNlLWRlbW8=", "endpoint": "aHR0cHM6Ly8xMC4xLjgwLjExOjY0NDM=",
                         "ca.crt": "Y2E=", "token": "dG9rZW4="},
}
SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary-token"}
ON = dict(BASE, hubFollower={"enabled": True, "secondary": SECONDARY})
OPERATOR = "kubeslice-operator"


def apply_patch(chart_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    assert shutil.which("patch"), "these tests run GNU patch as a user would: install it (apt-get install patch)"
    return subprocess.run(["patch", "-p1", "--batch", *extra, "-i", str(PATCH)], cwd=chart_dir,
                          capture_output=True, text=True)


def upstream_copy(workdir: Path, *, patched: bool) -> Path:
    """The upstream chart as `kubeslice-worker` next to the library, as a user who keeps
    both side by side has them; patched and with its dependency fetched when asked."""
    ignore = shutil.ignore_patterns("charts", "Chart.lock")
    if not (workdir / chartkit.LIBRARY.name).exists():
        shutil.copytree(chartkit.LIBRARY, workdir / chartkit.LIBRARY.name, ignore=ignore)
    chart_dir = workdir / "kubeslice-worker"
    shutil.copytree(UPSTREAM, chart_dir)
    if patched:
        result = apply_patch(chart_dir)
        assert result.returncode == 0, result.stdout + result.stderr
        helm.dependency_update(chart_dir)
    return chart_dir


@pytest.fixture(scope="module")
def patched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[helm.Chart]:
    with helm.Chart.load(upstream_copy(tmp_path_factory.mktemp("patched"), patched=True)) as chart:
        yield chart


@pytest.fixture(scope="module")
def unpatched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[helm.Chart]:
    with helm.Chart.load(upstream_copy(tmp_path_factory.mktemp("unpatched"), patched=False)) as chart:
        yield chart


def steady(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The documents without what upstream generates anew on every render: the admission
    webhook's certificate (genCA, genSignedCert in templates/webhook.yaml) and its CA
    bundle."""
    out = []
    for d in docs:
        d = yaml.safe_load(yaml.safe_dump(d))
        if d["kind"] == "Secret" and d["metadata"]["name"] == "kubeslice-admission-webhook-certs":
            d["data"] = {k: "<generated>" for k in d["data"]}
        for hook in d.get("webhooks") or []:
            hook["clientConfig"]["caBundle"] = "<generated>"
        out.append(d)
    return out


def operator(r: chartkit.Rendered) -> dict[str, Any]:
    (deployment,) = [d for d in r.kind("Deployment") if d["metadata"]["name"] == OPERATOR]
    return deployment


def test_the_fixture_is_kubeslice_worker_1_3_1():
    meta = yaml.safe_load((UPSTREAM / "Chart.yaml").read_text())
    assert (meta["name"], meta["version"], meta["appVersion"]) == ("kubeslice-worker", "1.3.1", "1.3.1")
    assert "dependencies" not in meta


def test_the_patch_applies_exactly(tmp_path):
    chart_dir = tmp_path / "kubeslice-worker"
    shutil.copytree(UPSTREAM, chart_dir)
    result = apply_patch(chart_dir, "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    # No hunk needs an offset or fuzz: the patch is made for this release.
    assert "offset" not in result.stdout and "fuzz" not in result.stdout, result.stdout
    patched_files = sorted(l.removeprefix("checking file ") for l in result.stdout.splitlines() if l.startswith("checking file "))
    assert patched_files == ["Chart.yaml", "templates/NOTES.txt", "templates/operator-deployment.yaml"]
    # Applied twice, it is refused rather than doubled.
    assert apply_patch(chart_dir).returncode == 0
    again = apply_patch(chart_dir, "--forward")
    assert again.returncode != 0 and "Reversed (or previously applied) patch detected" in again.stdout


def test_the_patch_is_the_one_wrap_the_docs_show():
    text = PATCH.read_text()
    assert f"+{chartkit.FIXTURE_WRAP}\n" in text
    assert "+" + chartkit.FIXTURE_WRAP.replace("hub-follower.inject", "hub-follower.notes") + "\n" in text
    assert "+    alias: hubFollower\n" in text


def test_disabled_the_patched_chart_renders_what_upstream_renders(patched, unpatched):
    for values in (BASE, dict(BASE, hubFollower={"enabled": False})):
        ours = chartkit.render_files(patched, values)
        theirs = chartkit.render_files(unpatched, BASE)
        assert set(ours) == set(theirs)
        for name in theirs:
            if name.endswith("NOTES.txt"):
                assert ours[name].strip() == theirs[name].strip()
            else:
                assert steady(chartkit.load_all_strict(ours[name])) == steady(chartkit.load_all_strict(theirs[name])), name


@pytest.mark.parametrize("mode", chartkit.MODES)
def test_the_patched_chart_lints_clean(tmp_path_factory, mode):
    chart_dir = upstream_copy(tmp_path_factory.mktemp("lint"), patched=True)
    values = dict(ON, hubFollower=dict(ON["hubFollower"], restart={"mode": mode}))
    report = helm.lint(chart_dir, values, strict=True)
    assert report["total_charts_linted"] == 1
    # Severity: 1 info, 2 warning, 3 error. Info ("icon is recommended") is allowed.
    assert [m for m in report["messages"] if m["severity"] >= 2] + report["errors"] == []


def test_enabled_the_operator_gets_the_sidecar(patched, unpatched):
    r = chartkit.render(patched, ON)
    before = operator(chartkit.render(unpatched, BASE))
    deployment = operator(r)
    chartkit.validate_k8s(deployment)
    pod = deployment["spec"]["template"]["spec"]
    names = [c["name"] for c in pod.get("initContainers", []) + pod["containers"]]
    assert names == ["hub-follower-install", "hub-follower", "kube-rbac-proxy", "manager"]
    (sidecar,) = [c for c in pod["initContainers"] if c["name"] == "hub-follower"]
    sidecar_env = {e["name"]: e for e in sidecar["env"]}
    # The primary hub is the manager's own: secretKeyRefs on kubeslice-hub.
    assert sidecar_env["HUB_HOST_ENDPOINT"]["valueFrom"] == {"secretKeyRef": {"name": "kubeslice-hub", "key": "endpoint"}}
    assert sidecar_env["CLUSTER_NAME"]["value"] == "worker-1"
    assert chartkit.mounts(sidecar)["/var/run/secrets/kubernetes.io/hub-serviceaccount"]["name"] == "hub-secret"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["hub-follower-secondary-hub"]["secret"]["secretName"] == SECONDARY["secretName"]
    # Everything else in the Deployment is upstream's.
    assert deployment["metadata"] == before["metadata"]
    assert deployment["spec"]["selector"] == before["spec"]["selector"]
    assert pod["affinity"] == before["spec"]["template"]["spec"]["affinity"]
    # The other documents are upstream's, and the wrap adds only the Events RBAC.
    theirs = steady(chartkit.render(unpatched, BASE).docs)
    ours = steady([d for d in r.docs if d is not deployment])
    assert [d for d in theirs if d not in ours] == [before]
    added = [d for d in ours if d not in theirs]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in added) == [
        ("Role", "kubeslice-operator-hub-follower-events"), ("RoleBinding", "kubeslice-operator-hub-follower-events")]
    assert "kubectl -n kubeslice-system exec deployment/kubeslice-operator -c hub-follower -- /hub-follower check" in r.notes


def grants(docs: list[dict[str, Any]], namespace: str, account: str, group: str, verb: str) -> list[str]:
    """The roles, bound to the service account by the chart's own bindings, that allow
    `verb` on `events` of API group `group` in `namespace`."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    found = []
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if b["kind"] == "RoleBinding" and b["metadata"].get("namespace") != namespace:
            continue
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == account and s.get("namespace") == namespace for s in b["subjects"]):
            continue
        ref = b["roleRef"]
        role = roles.get((ref["kind"], None if ref["kind"] == "ClusterRole" else b["metadata"]["namespace"], ref["name"]))
        for rule in (role or {}).get("rules") or []:
            if (group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", [])) \
                    and ({"events", "*"} & set(rule.get("resources", []))) \
                    and ({verb, "*"} & set(rule.get("verbs", []))):
                found.append(f"{ref['kind']}/{ref['name']}")
    return sorted(set(found))


def test_the_charts_own_rbac_already_grants_what_the_events_need(unpatched):
    # The sidecar records events.k8s.io/v1 Events (kube-runtime's Recorder) with the pod's
    # service account. kubeslice-worker 1.3.1 grants that account create and patch on
    # Events in both API groups already: the core group through its leader-election Role
    # (and its manager ClusterRole), events.k8s.io only through the manager ClusterRole.
    docs = chartkit.render(unpatched, BASE).docs
    deployment = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == OPERATOR][0]
    namespace = deployment["metadata"]["namespace"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert (namespace, account) == ("kubeslice-system", "kubeslice-controller-manager")
    for verb in ("create", "patch"):
        assert grants(docs, namespace, account, "", verb) == ["ClusterRole/kubeslice-manager-role", "Role/kubeslice-leader-election-role"]
        assert grants(docs, namespace, account, "events.k8s.io", verb) == ["ClusterRole/kubeslice-manager-role"]
    # So events.rbac.create: false renders no RBAC of ours and loses nothing.
    helm_md = chartkit.DOCS.read_text()
    assert "kubeslice-leader-election-role" in helm_md and "kubeslice-manager-role" in helm_md


def test_events_rbac_off_on_the_real_chart(patched):
    values = dict(ON, hubFollower=dict(ON["hubFollower"], events={"rbac": {"create": False}}))
    r = chartkit.render(patched, values)
    assert not [d for d in r.docs if "hub-follower" in d["metadata"]["name"]]


def test_docs_say_how_to_apply_and_reapply_the_patch():
    text = chartkit.DOCS.read_text()
    assert "charts/hub-follower/patches/kubeslice-worker-1.3.1.patch" in text
    assert "patch -p1" in text
    assert "helm pull kubeslice/kubeslice-worker --version 1.3.1 --untar" in text
    assert "helm dependency update" in text
    # The README and operations.md point at that section by its anchor.
    assert "\n### On the published kubeslice-worker chart: the patch\n" in text
    anchor = "#on-the-published-kubeslice-worker-chart-the-patch"
    assert f"docs/helm.md{anchor}" in chartkit.README.read_text()
    assert f"helm.md{anchor}" in (chartkit.REPO / "docs" / "operations.md").read_text()
