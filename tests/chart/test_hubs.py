"""hubFollower.hubs: hubs beyond the primary and the secondary (the binary's HUB_HUBS).

Each entry gets a Secret volume mounted at the binary's default directory for it in
both the sidecar and the worker (the handoff publishes the chosen hub's paths), and
one `NAME=ENDPOINT,token-file=...,ca-file=...` entry in HUB_HUBS. The example chart is
rendered by real Helm at Kubernetes 1.35 in every restart mode with the native sidecar
on and off and the wrapper on and off, the kubeslice-worker fixture at 1.33 and 1.27,
and the post-renderer; every manifest is validated with kubernetes-validate. With
`hubs` empty nothing changes: a render with hubs, less exactly those additions, is the
render without them, and `hubs: []` renders the same files as no `hubs` value at all.
Bad entries are refused by the schema and, under --skip-schema-validation too, by the
templates, naming hubFollower.hubs[i].<field>; what the schema cannot express (unique
names, reserved names, distinct endpoints, 8 hubs in all) only by the templates.
"""

from __future__ import annotations

import copy
import itertools

import helm_python as helm
import pytest

import chartkit
from chartkit import env, hf, mounts

KUBE = f"{chartkit.CURRENT_K8S}.0"
HUB_3 = {"name": "hub-3", "endpoint": "https://hub-3.example.com:6443", "secretName": "kubeslice-hub-3-token"}
DR = {"name": "dr", "endpoint": "https://10.1.80.14:6443", "secretName": "kubeslice-hub-dr-token", "tlsServerName": "hub-dr.internal"}
ONE = [HUB_3]
TWO = [HUB_3, DR]

HUB_3_DIR = "/var/run/secrets/kubernetes.io/hub-hub-3-serviceaccount"
DR_DIR = "/var/run/secrets/kubernetes.io/hub-dr-serviceaccount"
ONE_ENV = f"hub-3=https://hub-3.example.com:6443,token-file={HUB_3_DIR}/token,ca-file={HUB_3_DIR}/ca.crt"
TWO_ENV = ONE_ENV + f";dr=https://10.1.80.14:6443,token-file={DR_DIR}/token,ca-file={DR_DIR}/ca.crt,tls-server-name=hub-dr.internal"
# (volume, Secret, mount path) per entry.
EXPECTED = {
    "one": (ONE, ONE_ENV, [("hub-follower-hub-hub-3", "kubeslice-hub-3-token", HUB_3_DIR)]),
    "two": (TWO, TWO_ENV, [("hub-follower-hub-hub-3", "kubeslice-hub-3-token", HUB_3_DIR), ("hub-follower-hub-dr", "kubeslice-hub-dr-token", DR_DIR)]),
}
SINGLE_HUB = {"endpoint": "", "secretName": "", "tlsServerName": ""}
SECONDARY_DIR = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount"

ALL = [c for c in itertools.product(chartkit.MODES, (True, False), (True, False)) if chartkit.refusal(c[0], c[1], KUBE, c[2]) is None]


def combo_id(c) -> str:
    m, n, w = c
    return f"{m}-{'native' if n else 'regular'}-{'wrapped' if w else 'bare'}"


def assert_hubs_wired(r: chartkit.Rendered, hubs_env: str, expected: list[tuple[str, str, str]]) -> None:
    """HUB_HUBS is exact; each entry's Secret is a volume mounted read-only at its
    directory in the sidecar and the worker, and nowhere else; each path in HUB_HUBS
    is in that directory."""
    sidecar, worker = r.sidecar, r.worker
    (entry,) = [e for e in sidecar["env"] if e["name"] == "HUB_HUBS"]
    assert entry == {"name": "HUB_HUBS", "value": hubs_env}
    assert "HUB_HUBS" not in env(worker)
    for volume, secret, directory in expected:
        assert r.volumes[volume] == {
            "name": volume,
            "secret": {
                "secretName": secret,
                "defaultMode": 0o444,
                "items": [{"key": "token", "path": "token"}, {"key": "ca.crt", "path": "ca.crt"}],
            },
        }
        for c in (sidecar, worker):
            assert mounts(c)[directory] == {"name": volume, "mountPath": directory, "readOnly": True}, c["name"]
        for c in r.init_containers + r.containers:
            if c["name"] not in ("hub-follower", r.worker_name):
                assert directory not in mounts(c), c["name"]
        assert f"token-file={directory}/token" in hubs_env and f"ca-file={directory}/ca.crt" in hubs_env
    hub_volumes = sorted(v for v in r.volumes if v.startswith("hub-follower-hub-"))
    assert hub_volumes == sorted(v for v, _, _ in expected)
    names = [v["name"] for v in r.pod["volumes"]]
    assert len(names) == len(set(names))
    for c in r.init_containers + r.containers:
        for m in c.get("volumeMounts") or []:
            assert m["name"] in r.volumes, f"{c['name']} mounts unknown volume {m['name']}"


@pytest.mark.parametrize("count", ["one", "two"])
@pytest.mark.parametrize("mode,native,wrapper", ALL, ids=[combo_id(c) for c in ALL])
def test_listed_hubs_are_mounted_in_both_containers_and_passed_in_hub_hubs(chart, count, mode, native, wrapper):
    hubs, hubs_env, expected = EXPECTED[count]
    r = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper, hubs=hubs), kube_version=KUBE)
    for doc in r.docs:
        chartkit.validate_k8s(doc)
    assert_hubs_wired(r, hubs_env, expected)
    # The secondary hub stays as it was.
    assert env(r.sidecar)["HUB_SECONDARY_HOST_ENDPOINT"] == "https://hub-2.example.com:6443"
    assert mounts(r.worker)[SECONDARY_DIR]["name"] == "hub-follower-secondary-hub"


@pytest.mark.parametrize("kube", ["1.33", "1.27"])
@pytest.mark.parametrize("count", ["one", "two"])
def test_listed_hubs_on_the_kubeslice_worker_fixture(worker_chart, kube, count):
    hubs, hubs_env, expected = EXPECTED[count]
    values = {"hubFollower": {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}, "hubs": hubs}}
    r = chartkit.render(worker_chart, values, kube_version=f"{kube}.0")
    for doc in r.docs:
        chartkit.validate_k8s(doc, kube)
    assert_hubs_wired(r, hubs_env, expected)
    # kube-rbac-proxy gets nothing.
    plain = chartkit.render(worker_chart, {"hubFollower": {k: v for k, v in values["hubFollower"].items() if k != "hubs"}}, kube_version=f"{kube}.0")
    assert r.container("kube-rbac-proxy") == plain.container("kube-rbac-proxy")


def test_hubs_without_a_secondary_follow_more_than_one_hub(chart):
    values = chartkit.mode_values("signal", True, True, secondary=SINGLE_HUB, hubs=ONE, metrics={"prometheusRule": {"enabled": True}})
    r = chartkit.render(chart, values, kube_version=KUBE)
    for doc in r.docs:
        if doc["kind"] != "PrometheusRule":  # a CRD; test_monitoring.py checks it
            chartkit.validate_k8s(doc)
    assert_hubs_wired(r, ONE_ENV, EXPECTED["one"][2])
    # No secondary anywhere: HUB_HUBS alone makes the binary follow the primary and hub-3.
    assert not [k for k in env(r.sidecar) if k.startswith("HUB_SECONDARY_")]
    assert "hub-follower-secondary-hub" not in r.volumes
    assert all(SECONDARY_DIR not in mounts(c) for c in r.init_containers + r.containers)
    # The "two hubs" switch is on: a PrometheusRule, and the notes of a following sidecar.
    assert len(r.kind("PrometheusRule")) == 1
    assert "Single-hub mode" not in r.notes
    assert 'The Secret "kubeslice-hub-3-token" must hold `token` and `ca.crt` for the hub hub-3 https://hub-3.example.com:6443.' in r.notes
    assert "secondary hub" not in r.notes
    assert "On every hub the worker's hub identity needs get, list and watch on" in r.notes


def test_notes_name_every_hubs_secret(chart):
    r = chartkit.render(chart, hf(hubs=TWO))
    assert 'The Secret "kubeslice-hub-secondary-token" must hold `token` and `ca.crt` for the secondary hub https://hub-2.example.com:6443.' in r.notes
    assert 'for the hub hub-3 https://hub-3.example.com:6443.' in r.notes
    assert 'The Secret "kubeslice-hub-dr-token" must hold `token` and `ca.crt` for the hub dr https://10.1.80.14:6443.' in r.notes
    assert "On every hub" in r.notes
    assert "On both hubs" in chartkit.render(chart).notes


def test_the_secondary_alert_covers_the_listed_hubs_too(chart):
    # One rule for every hub the worker is not on, selected by role (the active gauge),
    # not by name: the listed hubs need no rule of their own, so the rules do not change
    # with `hubs` (alerts/hub-follower.test.yml fires it for a listed hub).
    asked = {"prometheusRule": {"enabled": True}}
    without = chartkit.rule_exprs(chartkit.render(chart, hf(metrics=asked)))
    with_hubs = chartkit.rule_exprs(chartkit.render(chart, hf(metrics=asked, hubs=TWO)))
    assert with_hubs == without
    used = chartkit.selectors(with_hubs["HubFollowerSecondaryHubUnreachable"])
    assert "kubeslice_worker_hub_active" in {name for name, _ in used}
    assert all("hub" not in m for _, m in used)


def strip_hubs(r: chartkit.Rendered) -> list[dict]:
    """The documents less what hubFollower.hubs adds: HUB_HUBS, the hub-follower-hub-*
    volumes and their mounts."""
    docs = copy.deepcopy(r.docs)
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        pod = doc["spec"]["template"]["spec"]
        pod["volumes"] = [v for v in pod["volumes"] if not v["name"].startswith("hub-follower-hub-")]
        for c in (pod.get("initContainers") or []) + pod["containers"]:
            if "env" in c:
                c["env"] = [e for e in c["env"] if e["name"] != "HUB_HUBS"]
            if "volumeMounts" in c:
                c["volumeMounts"] = [m for m in c["volumeMounts"] if not m["name"].startswith("hub-follower-hub-")]
    return docs


@pytest.mark.parametrize("mode,native,wrapper", ALL, ids=[combo_id(c) for c in ALL])
def test_hubs_add_only_their_env_volumes_and_mounts(chart, mode, native, wrapper):
    without = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper), kube_version=KUBE)
    empty = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper, hubs=[]), kube_version=KUBE)
    with_hubs = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper, hubs=TWO), kube_version=KUBE)
    assert empty.files == without.files
    assert strip_hubs(with_hubs) == without.docs
    assert "HUB_HUBS" not in env(without.sidecar)
    assert not [v for v in without.volumes if v.startswith("hub-follower-hub-")]


@pytest.mark.parametrize("secondary", [None, SINGLE_HUB], ids=["two-hubs", "single-hub"])
def test_empty_hubs_change_nothing_in_any_file(chart, worker_chart, secondary):
    # `hubs: null` removes the key from the merged values, as a library without the
    # value would have it; `[]` is the default.
    extra = {} if secondary is None else {"secondary": secondary}
    for parent, base in ((chart, {}), (worker_chart, {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}})):
        values = dict(base, **extra, metrics={"prometheusRule": {"enabled": True}})
        absent = chartkit.render_files(parent, {"hubFollower": dict(values, hubs=None)}, kube_version="1.33.0")
        for hubs in ([], None):
            assert chartkit.render_files(parent, {"hubFollower": dict(values, hubs=hubs)}, kube_version="1.33.0") == absent


def test_the_post_renderer_gives_the_same_documents_with_hubs(post_renderer_chart, plain_worker_chart, worker_chart):
    values = {"hubFollower": {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}, "hubs": TWO}}
    manifests = chartkit.post_renderer_input(chartkit.render_files(plain_worker_chart, None, kube_version="1.33.0"))
    out = chartkit.render(post_renderer_chart, dict(values, manifests=manifests), kube_version="1.33.0")
    patched = chartkit.render(worker_chart, values, kube_version="1.33.0")
    assert chartkit.as_multiset(out.docs) == chartkit.as_multiset(patched.docs)
    assert env(out.sidecar)["HUB_HUBS"] == TWO_ENV


# The most the binary takes: 8 hubs in all.
def entries(n: int) -> list[dict]:
    return [{"name": f"hub-{i}", "endpoint": f"https://10.1.80.{20 + i}:6443", "secretName": f"kubeslice-hub-{i}-token"} for i in range(3, 3 + n)]


@pytest.mark.parametrize(
    "values,count",
    [
        (hf(hubs=entries(6)), 6),
        (hf(secondary=SINGLE_HUB, hubs=entries(7)), 7),
        (hf(hubs=[dict(HUB_3, name="a" * 32)]), 1),
        (hf(hubs=[dict(HUB_3, endpoint="https://[fd00::3]:6443", tlsServerName="fd00::3")]), 1),
    ],
    ids=["6-with-a-secondary", "7-without", "name-of-32", "ipv6"],
)
def test_the_limits_render(chart, values, count):
    r = chartkit.render(chart, values)
    chartkit.validate_k8s(r.deployment)
    assert len(env(r.sidecar)["HUB_HUBS"].split(";")) == count
    assert len([v for v in r.volumes if v.startswith("hub-follower-hub-")]) == count


SCHEMA_CASES = [
    # (id, values, field path in the message, words of the constraint)
    ("name-uppercase", hf(hubs=[dict(HUB_3, name="Hub-3")]), "/hubs/0/name", "does not match pattern"),
    ("name-too-long", hf(hubs=[dict(HUB_3, name="a" * 33)]), "/hubs/0/name", "does not match pattern"),
    ("name-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "name"}]), "/hubs/0", "missing property 'name'"),
    ("endpoint-http", hf(hubs=[dict(HUB_3, endpoint="http://hub-3:6443")]), "/hubs/0/endpoint", "does not match pattern"),
    ("endpoint-with-comma", hf(hubs=[dict(HUB_3, endpoint="https://hub-3:6443,ca-file=/x")]), "/hubs/0/endpoint", "does not match pattern"),
    ("endpoint-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "endpoint"}]), "/hubs/0", "missing property 'endpoint'"),
    ("secret-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "secretName"}]), "/hubs/0", "missing property 'secretName'"),
    ("secret-invalid", hf(hubs=[dict(HUB_3, secretName="Hub_3")]), "/hubs/0/secretName", "does not match pattern"),
    ("tls-server-name-comma", hf(hubs=[dict(HUB_3, tlsServerName="a,b")]), "/hubs/0/tlsServerName", "does not match pattern"),
    ("unknown-key", hf(hubs=[dict(HUB_3, endpointFrom={"secretKeyRef": {"name": "s", "key": "endpoint"}})]), "/hubs/0", "'endpointFrom' not allowed"),
    ("eight-entries", hf(secondary=SINGLE_HUB, hubs=entries(8)), "/hubs", "maxItems"),
    ("not-a-list", hf(hubs={"hub-3": HUB_3}), "/hubs", "want array"),
]


@pytest.mark.parametrize("values,field,constraint", [c[1:] for c in SCHEMA_CASES], ids=[c[0] for c in SCHEMA_CASES])
def test_schema_rejects_a_bad_entry_naming_it(chart, values, field, constraint):
    with pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name=chartkit.RELEASE, namespace=chartkit.NAMESPACE)
    message = str(caught.value)
    assert "hubFollower" in message and field in message and constraint in message, message


# What the schema cannot express: the templates refuse it with the schema on.
TEMPLATE_CASES = [
    ("name-twice", hf(hubs=[HUB_3, dict(DR, name="hub-3")]), "hubFollower.hubs[1].name", '"hub-3" is already the name of hubFollower.hubs[0]'),
    ("name-primary", hf(hubs=[dict(HUB_3, name="primary")]), "hubFollower.hubs[0].name", '"primary" is the name of the hub set by hubFollower.primary'),
    ("name-secondary", hf(hubs=[HUB_3, dict(DR, name="secondary")]), "hubFollower.hubs[1].name", '"secondary" is the name of the hub set by hubFollower.secondary'),
    ("endpoint-of-the-primary", hf(hubs=[dict(HUB_3, endpoint="https://hub-1.example.com:6443/")]), "hubFollower.hubs[0].endpoint", "is the same hub as the primary hub"),
    ("endpoint-of-the-secondary", hf(hubs=[dict(HUB_3, endpoint="https://HUB-2.example.com:6443")]), "hubFollower.hubs[0].endpoint", "is the same hub as hubFollower.secondary.endpoint"),
    ("endpoint-twice", hf(hubs=[HUB_3, dict(DR, endpoint=HUB_3["endpoint"])]), "hubFollower.hubs[1].endpoint", "is the same hub as hubFollower.hubs[0].endpoint"),
    ("nine-hubs", hf(hubs=entries(7)), "hubFollower.hubs", "7 entries make 9 hubs with the primary and the secondary; at most 8 hubs in all, so at most 6 entries with a secondary hub"),
]


@pytest.mark.parametrize("values,field,reason", [c[1:] for c in TEMPLATE_CASES], ids=[c[0] for c in TEMPLATE_CASES])
def test_template_rejects_what_the_schema_cannot_express(chart, values, field, reason):
    chart.validate_schema(chart.merge_values(values))
    message = chartkit.render_error(chart, values)
    assert f"{field}: " in message and reason in message, message


@pytest.fixture(scope="module")
def unchecked_chart(tmp_path_factory):
    """The example chart without the library's schema, as `--skip-schema-validation`
    renders it."""
    example = chartkit.prepare_charts(tmp_path_factory.mktemp("unchecked-hubs"), without_schema=True)
    with helm.Chart.load(example) as unchecked:
        yield unchecked


UNCHECKED_CASES = TEMPLATE_CASES + [
    ("name-uppercase", hf(hubs=[dict(HUB_3, name="Hub-3")]), "hubFollower.hubs[0].name", '"Hub-3" must be a DNS-1123 label of at most 32 characters'),
    ("name-too-long", hf(hubs=[dict(HUB_3, name="a" * 33)]), "hubFollower.hubs[0].name", "must be a DNS-1123 label of at most 32 characters"),
    ("name-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "name"}]), "hubFollower.hubs[0].name", '"" must be a DNS-1123 label'),
    ("endpoint-http", hf(hubs=[dict(HUB_3, endpoint="http://hub-3:6443")]), "hubFollower.hubs[0].endpoint", '"http://hub-3:6443" must be the hub\'s https:// URL'),
    ("endpoint-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "endpoint"}]), "hubFollower.hubs[0].endpoint", "must be the hub's https:// URL"),
    ("endpoint-with-semicolon", hf(hubs=[dict(HUB_3, endpoint="https://hub-3:6443;x=https://x")]), "hubFollower.hubs[0].endpoint", "must be the hub's https:// URL"),
    ("secret-missing", hf(hubs=[{k: v for k, v in HUB_3.items() if k != "secretName"}]), "hubFollower.hubs[0].secretName", "required; name the Secret"),
    ("secret-invalid", hf(hubs=[dict(HUB_3, secretName="Hub_3")]), "hubFollower.hubs[0].secretName", "is not a Secret name"),
    ("tls-server-name-comma", hf(hubs=[dict(HUB_3, tlsServerName="a,b")]), "hubFollower.hubs[0].tlsServerName", "must be a DNS name or an IP address"),
    ("unknown-key", hf(hubs=[dict(HUB_3, tokenFile="/t")]), "hubFollower.hubs[0].tokenFile", "unknown key"),
    ("eight-without-a-secondary", hf(secondary=SINGLE_HUB, hubs=entries(8)), "hubFollower.hubs", "8 entries make 9 hubs with the primary; at most 8 hubs in all, so at most 7 entries without a secondary hub"),
    ("not-a-list", hf(hubs={"hub-3": HUB_3}), "hubFollower.hubs", "must be a list"),
    ("entry-not-a-map", hf(hubs=["hub-3=https://hub-3:6443"]), "hubFollower.hubs[0]", "must be a map with name, endpoint and secretName"),
]


@pytest.mark.parametrize("values,field,reason", [c[1:] for c in UNCHECKED_CASES], ids=[c[0] for c in UNCHECKED_CASES])
def test_template_rejects_a_bad_entry_without_the_schema_too(unchecked_chart, values, field, reason):
    message = chartkit.render_error(unchecked_chart, values)
    assert f"{field}: " in message and reason in message, message
