"""Kubernetes Events on the worker pod: the sidecar's env (HUB_EVENTS, POD_NAME,
POD_NAMESPACE, POD_UID) and the Role and RoleBinding that let the pod's service account record
them, through the example chart and the kubeslice-worker fixture, with events and
their RBAC on and off."""

from __future__ import annotations

import itertools

import helm_python as helm
import pytest

import chartkit

SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}

# What each parent is: its values under hubFollower, its worker Deployment's name, the
# service account its pod runs as, and the namespace its Deployment is in.
PARENTS = {
    # The example's pod names no service account: Kubernetes gives it `default`. Its
    # Deployment names no namespace: the release namespace.
    "example": ({}, "demo-worker", "default", None),
    # kubeslice-worker's operator sets serviceAccountName and its own namespace.
    "fixture": ({"enabled": True, "secondary": SECONDARY}, "kubeslice-operator", "kubeslice-controller-manager", "kubeslice-system"),
}
RULE = {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
LABELS = {"app.kubernetes.io/name": "hub-follower", "app.kubernetes.io/instance": chartkit.RELEASE, "app.kubernetes.io/managed-by": "Helm"}

COMBOS = list(itertools.product(PARENTS, (True, False), (True, False)))
IDS = [f"{p}-events-{'on' if e else 'off'}-rbac-{'on' if r else 'off'}" for p, e, r in COMBOS]


def events(parent_values: dict, enabled: bool | None = None, rbac: bool | None = None) -> dict:
    ev: dict = {}
    if enabled is not None:
        ev["enabled"] = enabled
    if rbac is not None:
        ev["rbac"] = {"create": rbac}
    return {"hubFollower": dict(parent_values, **({"events": ev} if ev else {}))}


@pytest.fixture
def charts(chart, worker_chart):
    return {"example": chart, "fixture": worker_chart}


def rbac(r: chartkit.Rendered) -> tuple[dict, dict]:
    (role,) = r.kind("Role")
    (binding,) = r.kind("RoleBinding")
    return role, binding


def by_name(items) -> dict:
    return {i["name"]: i for i in items or []}


@pytest.mark.parametrize("parent,enabled,create", COMBOS, ids=IDS)
def test_events_and_their_rbac(charts, parent, enabled, create):
    values, deployment, account, namespace = PARENTS[parent]
    r = chartkit.render(charts[parent], events(values, enabled, create))
    for doc in r.docs:
        chartkit.validate_k8s(doc)
    env = by_name(r.sidecar["env"])
    if enabled:
        assert env["HUB_EVENTS"] == {"name": "HUB_EVENTS", "value": "true"}
        assert env["POD_NAME"] == {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
        assert env["POD_NAMESPACE"] == {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
        assert env["POD_UID"] == {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}
    else:
        # Exactly the string the binary reads, and no downward API entries.
        assert env["HUB_EVENTS"] == {"name": "HUB_EVENTS", "value": "false"}
        assert not {"POD_NAME", "POD_NAMESPACE", "POD_UID"} & set(env)
    # The worker gets nothing of it.
    assert not {"HUB_EVENTS", "POD_NAME", "POD_NAMESPACE", "POD_UID"} & set(chartkit.env(r.worker))

    if not (enabled and create):
        assert r.kind("Role") == [] and r.kind("RoleBinding") == []
        assert "hub-follower-events" not in "".join(r.files.values())
        return
    role, binding = rbac(r)
    name = f"{deployment}-hub-follower-events"
    namespace = namespace or chartkit.NAMESPACE
    for obj in (role, binding):
        assert obj["metadata"] == {"name": name, "namespace": namespace, "labels": LABELS}
    assert role["rules"] == [RULE]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    # The service account the worker pod runs as, in the pod's namespace.
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    assert (r.pod.get("serviceAccountName") or "default") == account


def test_events_and_rbac_are_on_by_default(charts):
    for parent, (values, *_) in PARENTS.items():
        r = chartkit.render(charts[parent], events(values))
        assert chartkit.env(r.sidecar)["HUB_EVENTS"] == "true"
        rbac(r)


@pytest.mark.parametrize("parent", PARENTS)
def test_nothing_of_it_without_hub_follower(charts, parent):
    # Asked for, but hub-follower itself is off: the parent's manifests as they are.
    r = chartkit.render_files(charts[parent], {"hubFollower": {"enabled": False, "events": {"enabled": True, "rbac": {"create": True}}}})
    assert "hub-follower" not in "".join(t for n, t in r.items() if not n.endswith("NOTES.txt"))
    assert [d["kind"] for d in chartkit.Rendered(r).docs if d["kind"] in ("Role", "RoleBinding")] == []


@pytest.mark.parametrize("parent", PARENTS)
def test_rbac_follows_the_deployments_namespace(charts, parent):
    values, deployment, _, namespace = PARENTS[parent]
    files = charts[parent].render(events(values), name=chartkit.RELEASE, namespace="other")
    role, binding = rbac(chartkit.Rendered(files))
    # The fixture's operator names kubeslice-system itself; the example's follows the release.
    expected = namespace or "other"
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == expected
    assert binding["subjects"][0]["namespace"] == expected


def example_with_service_account(tmp_path, lines: str):
    """The example chart with `lines` added to its pod spec."""
    example = chartkit.prepare_charts(tmp_path)
    deployment = example / "templates" / "deployment.yaml"
    text = deployment.read_text()
    anchor = "    spec:\n      terminationGracePeriodSeconds: 10\n"
    assert text.count(anchor) == 1
    deployment.write_text(text.replace(anchor, "    spec:\n" + lines + "      terminationGracePeriodSeconds: 10\n"))
    return example


@pytest.mark.parametrize(
    "lines,values,account",
    [
        # A parent value, rendered into the pod spec before hub-follower reads it.
        ("      {{- with .Values.worker.serviceAccountName }}\n      serviceAccountName: {{ . }}\n      {{- end }}\n",
         {"worker": {"serviceAccountName": "worker-sa"}}, "worker-sa"),
        ("      {{- with .Values.worker.serviceAccountName }}\n      serviceAccountName: {{ . }}\n      {{- end }}\n",
         {}, "default"),
        # The deprecated field, and serviceAccountName winning over it as in Kubernetes.
        ("      serviceAccount: legacy-sa\n", {}, "legacy-sa"),
        ("      serviceAccount: legacy-sa\n      serviceAccountName: worker-sa\n", {}, "worker-sa"),
    ],
    ids=["value-set", "value-unset", "deprecated-field", "name-wins"],
)
def test_service_account_is_read_from_the_pod_spec(tmp_path, lines, values, account):
    with helm.Chart.load(example_with_service_account(tmp_path, lines)) as chart:
        r = chartkit.render(chart, values)
    _, binding = rbac(r)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": chartkit.NAMESPACE}]
    for doc in r.docs:
        chartkit.validate_k8s(doc)


def test_a_long_deployment_name_gives_a_valid_name(tmp_path):
    example = chartkit.prepare_charts(tmp_path)
    helpers = example / "templates" / "_helpers.tpl"
    helpers.write_text(helpers.read_text().replace('printf "%s-worker" .Release.Name | trunc 63', 'printf "%s-worker-operator-with-a-name-of-fifty-chars" .Release.Name | trunc 63'))
    with helm.Chart.load(example) as chart:
        r = chartkit.render(chart)
    role, binding = rbac(r)
    assert len(role["metadata"]["name"]) <= 63 and not role["metadata"]["name"].endswith("-")
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == binding["metadata"]["name"]
    chartkit.validate_k8s(role)
