"""Render the hub-follower charts with the Helm v4 SDK and take the result apart.

Helm comes from the `helm-python-sdk` wheel (import name `helm_python`), which wraps
Helm's Go library: no helm binary and no cluster. The example chart depends on
the library through `file://../hub-follower`; `prepare_charts` resolves that offline in a
temporary copy, so the repository's chart directories are never written to. The
kubeslice-worker-shaped fixture is kept plain (without hub-follower) and gets it the way
a user's copy of the real chart does, from charts/kubeslice-worker-1.3.1.patch, applied
by `prepare_fixture` in a temporary copy.

Rendered YAML is loaded with a loader that refuses duplicate mapping keys, so every
test that renders also checks that no key is written twice.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import json

import helm_python as helm
import kubernetes_validate
import promql_parser
import yaml
from helm_python import _native

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "charts"
LIBRARY = CHARTS / "hub-follower"
EXAMPLE = CHARTS / "hub-follower-example"
DOCS = REPO / "docs" / "helm.md"
# The alerts' runbooks, one `## <alert name>` section each; the default runbookBaseURL.
RUNBOOKS = REPO / "docs" / "runbooks.md"
# The Grafana dashboard the library renders into a ConfigMap (dashboard.enabled).
DASHBOARD = LIBRARY / "files" / "dashboard.json"
README = REPO / "README.md"
# A parent chart shaped like kubeslice-worker (charts/kubeslice-worker, 1.3.1), without
# hub-follower.
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "kubeslice-worker"
# The edits of docs/helm.md section 1 for kubeslice-worker 1.3.1; the fixture gets
# hub-follower from it alone.
PATCH = CHARTS / "kubeslice-worker-1.3.1.patch"
# The line of the patch that renders the operator template through hub-follower.inject.
FIXTURE_WRAP = '{{ include "hub-follower.inject" (dict "root" . "manifests" (include "kubeslice-worker.operator" .)) }}'
# Runs hub-follower.inject on manifests read from a file (a Helm post-renderer).
POST_RENDERER = CHARTS / "hub-follower-post-renderer"

# A current Kubernetes for validation, and the newest one without native sidecars
# (restartPolicy on a container appeared in 1.28 and is on by default from 1.29).
CURRENT_K8S = "1.35"
PRE_SIDECAR_K8S = "1.27"

RELEASE = "demo"
NAMESPACE = "kubeslice-system"

MODES = ("signal", "liveness", "none", "restart-all", "in-place")
# restart-all's container restart rule (RestartAllContainers, KEP-5532) is new in
# Kubernetes 1.35 and allowed only on a native sidecar: the chart refuses the mode below
# 1.35 and with nativeSidecar: false. Matrices render it at this version.
RESTART_ALL_K8S = "1.35"
RESTART_ALL_BELOW_1_35 = "hubFollower.restart.mode: restart-all needs Kubernetes 1.35 or later"
RESTART_ALL_REGULAR = "hubFollower.nativeSidecar: false does not go with hubFollower.restart.mode: restart-all"
# in-place is the exec wrapper's work: the chart refuses it without the wrapper.
IN_PLACE_BARE = "hubFollower.restart.mode: in-place needs execWrapper: true"


def at_least(kube: str, minimum: str) -> bool:
    """kube (`1.33` or `1.33.0`) is minimum or later."""
    return tuple(int(p) for p in kube.split(".")[:2]) >= tuple(int(p) for p in minimum.split(".")[:2])


def refusal(mode: str, native: bool | None, kube: str, wrapper: bool = True) -> str | None:
    """The start of the chart's message when it refuses this mode, nativeSidecar, Kubernetes
    version and execWrapper; None when it renders. restart-all is refused for the first
    three, in-place without the wrapper."""
    if mode == "in-place":
        return None if wrapper else IN_PLACE_BARE
    if mode != "restart-all":
        return None
    if not at_least(kube, RESTART_ALL_K8S):
        return RESTART_ALL_BELOW_1_35
    if native is False:
        return RESTART_ALL_REGULAR
    return None


class StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping with the same key twice (PyYAML's own
    loaders keep the last one silently, as Kubernetes does)."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_all_strict(text: str) -> list[Any]:
    return [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]


def patched_files(patch: Path = PATCH) -> list[str]:
    """The paths a patch changes, relative to the chart directory."""
    return re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), flags=re.M)


def patch_added_lines(path: str, patch: Path = PATCH) -> list[str]:
    """The lines a patch adds to one file."""
    text = patch.read_text()
    section = text[text.index(f"+++ b/{path}\n"):].split("\n--- a/")[0]
    return [line[1:] for line in section.splitlines()[1:] if line.startswith("+")]


def apply_patch(chart_dir: Path, patch: Path = PATCH, *, check: bool = False) -> None:
    """`git apply [--check]` the patch inside chart_dir, as docs/helm.md tells a user to.

    Raises with git's own message when a hunk does not apply. Run inside a Git work
    tree, `git apply` would take the paths as relative to it and could skip files
    without failing, so the search for a repository stops at chart_dir, and every file
    of the patch must be reported as checked (and, without check, applied cleanly).
    """
    env = dict(os.environ, LC_ALL="C", GIT_CEILING_DIRECTORIES=str(chart_dir.resolve().parent))
    args = ["git", "apply", "--verbose"] + (["--check"] if check else []) + [str(patch)]
    done = subprocess.run(args, cwd=chart_dir, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} in {chart_dir} failed ({done.returncode}):\n{done.stderr}")
    expected = [f"Checking patch {p}..." for p in patched_files(patch)]
    if not check:
        expected += [f"Applied patch {p} cleanly." for p in patched_files(patch)]
    missing = [line for line in expected if line not in done.stderr.splitlines()]
    assert not missing, f"{' '.join(args)} in {chart_dir} did not report {missing}:\n{done.stderr}"


def copy_beside_library(chart: Path, workdir: Path) -> Path:
    """Copy a chart into workdir with the library beside it, where its
    `file://../hub-follower` points; neither copy takes a built charts/ or Chart.lock."""
    ignore = shutil.ignore_patterns("charts", "Chart.lock")
    if not (workdir / LIBRARY.name).exists():
        shutil.copytree(LIBRARY, workdir / LIBRARY.name, ignore=ignore)
    dest = workdir / chart.name
    shutil.copytree(chart, dest, ignore=ignore)
    return dest


def prepare_fixture(workdir: Path, *, plain: bool = False, fetch: bool = True) -> Path:
    """Copy the library and the kubeslice-worker-shaped fixture into workdir.

    plain=True gives the fixture as it is in the repository, without hub-follower.
    Otherwise charts/kubeslice-worker-1.3.1.patch is applied to the copy and, with
    fetch, the dependency is resolved (`helm dependency update`).
    """
    fixture = copy_beside_library(FIXTURE, workdir)
    if not plain:
        apply_patch(fixture)
        if fetch:
            helm.dependency_update(fixture)
    return fixture


def prepare_post_renderer(workdir: Path) -> Path:
    """Copy the post-renderer chart beside the library into workdir and build its charts/."""
    chart = copy_beside_library(POST_RENDERER, workdir)
    helm.dependency_update(chart)
    return chart


def prepare_charts(workdir: Path, *, without_schema: bool = False) -> Path:
    """Copy both charts side by side into workdir and build the example's charts/.

    without_schema drops the library's values.schema.json first, which renders as
    `--skip-schema-validation` would. Returns the example chart's directory.
    """
    example = copy_beside_library(EXAMPLE, workdir)
    if without_schema:
        (workdir / LIBRARY.name / "values.schema.json").unlink()
    # Resolves file://../hub-follower into charts/hub-follower-0.1.0.tgz and writes
    # Chart.lock; a file:// repository needs no network.
    helm.dependency_update(example)
    return example


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def hf(**overrides: Any) -> dict[str, Any]:
    """Values that override `hubFollower.*` of the example chart."""
    return {"hubFollower": overrides}


def mode_values(mode: str, native: bool, wrapper: bool, **extra: Any) -> dict[str, Any]:
    return hf(restart={"mode": mode}, nativeSidecar=native, execWrapper=wrapper, **extra)


@dataclass
class Rendered:
    """The example chart's rendered manifests, parsed."""

    files: dict[str, str]
    worker_name: str = "manager"
    docs: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.docs = []
        for name, text in self.files.items():
            if name.endswith("NOTES.txt"):
                continue
            self.docs.extend(load_all_strict(text))

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    @property
    def notes(self) -> str:
        return next((t for n, t in self.files.items() if n.endswith("NOTES.txt")), "")

    def file(self, suffix: str) -> str:
        (text,) = [t for n, t in self.files.items() if n.endswith(suffix)]
        return text

    @property
    def deployment(self) -> dict[str, Any]:
        (deployment,) = self.kind("Deployment")
        return deployment

    @property
    def pod(self) -> dict[str, Any]:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def annotations(self) -> dict[str, str]:
        return self.deployment["spec"]["template"]["metadata"].get("annotations") or {}

    @property
    def init_containers(self) -> list[dict[str, Any]]:
        return self.pod.get("initContainers") or []

    @property
    def containers(self) -> list[dict[str, Any]]:
        return self.pod["containers"]

    def container(self, name: str) -> dict[str, Any] | None:
        for c in self.init_containers + self.containers:
            if c["name"] == name:
                return c
        return None

    @property
    def worker(self) -> dict[str, Any]:
        worker = self.container(self.worker_name)
        assert worker is not None, f"the worker container `{self.worker_name}` is missing"
        return worker

    @property
    def sidecar(self) -> dict[str, Any]:
        sidecar = self.container("hub-follower")
        assert sidecar is not None, "the hub-follower sidecar is missing"
        return sidecar

    @property
    def installer(self) -> dict[str, Any] | None:
        return self.container("hub-follower-install")

    @property
    def volumes(self) -> dict[str, dict[str, Any]]:
        return {v["name"]: v for v in self.pod.get("volumes") or []}


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """volumeMounts by mountPath."""
    return {m["mountPath"]: m for m in container.get("volumeMounts") or []}


def render_files(chart: helm.Chart, values: dict[str, Any] | None = None, kube_version: str | None = None) -> dict[str, str]:
    """Render like `helm template --kube-version`. helm-python-sdk's Chart.render does
    not expose the option, but its native helm_render takes it in the same options
    JSON as name and namespace (it sets .Capabilities.KubeVersion)."""
    if kube_version is None:
        return chart.render(values, name=RELEASE, namespace=NAMESPACE)
    opts = {"name": RELEASE, "namespace": NAMESPACE, "kube_version": kube_version}
    out = _native.call_string("helm_render", chart._raw(), None if values is None else json.dumps(values), json.dumps(opts))
    return json.loads(out)


def render(chart: helm.Chart, values: dict[str, Any] | None = None, kube_version: str | None = None) -> Rendered:
    return Rendered(render_files(chart, values, kube_version))


def render_error(chart: helm.Chart, values: dict[str, Any], kube_version: str | None = None) -> str:
    """Render, expecting Helm to refuse; returns its message."""
    try:
        render_files(chart, values, kube_version)
    except helm.HelmError as exc:
        return str(exc)
    raise AssertionError(f"rendering with {values!r} succeeded; it should have failed")


# How Helm splits a rendered file into documents (releaseutil.SplitManifests).
HELM_DOCUMENT_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")


def post_renderer_input(files: dict[str, str]) -> str:
    """The stream Helm writes to a post-renderer for these rendered files: every
    document on its own, trimmed, after `---` and a `# Source:` line. NOTES.txt and
    hooks are not part of it."""
    out = []
    for name, text in sorted(files.items()):
        if name.endswith("NOTES.txt"):
            continue
        for doc in HELM_DOCUMENT_SEPARATOR.split(text):
            parsed = yaml.safe_load(doc) if doc.strip() else None
            if parsed is None:
                continue
            if "helm.sh/hook" in ((parsed.get("metadata") or {}).get("annotations") or {}):
                continue
            out.append(f"---\n# Source: {name}\n{doc.strip()}\n")
    return "".join(out)


def as_multiset(docs: list[dict[str, Any]]) -> list[str]:
    """Documents compared as objects, in any order."""
    return sorted(json.dumps(d, sort_keys=True) for d in docs)


def validate_k8s(doc: dict[str, Any], version: str = CURRENT_K8S) -> None:
    """Validate one manifest against the Kubernetes OpenAPI schema (strict: unknown
    fields fail too)."""
    kubernetes_validate.validate(doc, version, strict=True)


# The metric names the chart's alerts and dashboard may use (histogram series carry
# their suffixes). That the release binary really exports each name the chart uses is
# checked against its /metrics in tests/image/test_image.py.
METRICS = {
    "kubeslice_worker_hub_switches_total",
    "kubeslice_worker_hub_probe_errors_total",
    "kubeslice_worker_hub_probe_duration_seconds_bucket",
    "kubeslice_worker_hub_probe_duration_seconds_sum",
    "kubeslice_worker_hub_probe_duration_seconds_count",
    "kubeslice_worker_hub_active",
    "kubeslice_worker_hub_claims_rejected_total",
    "kubeslice_worker_hub_switch_pending_confirmations",
    "kubeslice_worker_hub_last_probe_success_timestamp_seconds",
    "kubeslice_worker_hub_handoff_write_errors_total",
    "kubeslice_worker_hub_worker_restarts_total",
    "kubeslice_worker_hub_worker_on_current_decision",
    "kubeslice_worker_hub_watch_events_total",
    "kubeslice_worker_hub_watch_restarts_total",
    "kubeslice_worker_hub_watch_up",
    "kubeslice_worker_hub_events_failed_total",
    "kubeslice_worker_hub_override_until_timestamp_seconds",
    "kubeslice_worker_hub_override_refused",
    "kubeslice_worker_hub_switch_held",
    "kubeslice_worker_hub_split_brain",
    "kubeslice_worker_hub_active_hub_unclaimed_since_timestamp_seconds",
    "kubeslice_worker_hub_basis_unconfirmed_since_timestamp_seconds",
    "kubeslice_worker_hub_claim_seen_timestamp_seconds",
    "hub_follower_build_info",
}


def selectors(expr: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """Parse a PromQL expression (raises ValueError when it is not valid PromQL) and
    return its vector selectors as (metric, {label: (op, value)})."""
    found = []

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            matchers = {m.name: (str(m.op).rpartition(".")[2], m.value) for m in node.matchers.matchers}
            found.append((node.name, matchers))

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    return {name for name, _ in selectors(expr)}


# Grafana's interval variables, which are not PromQL until Grafana substitutes them.
GRAFANA_INTERVALS = ("$__rate_interval", "$__interval", "$__range")


def grafana_promql(expr: str) -> str:
    """A dashboard query as Grafana sends it: interval variables become a duration.
    Label variables ($pod) are left in place; they only occur inside quoted matcher
    values, which PromQL takes as they are."""
    for variable in GRAFANA_INTERVALS:
        expr = expr.replace(variable, "5m")
    return expr


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those inside collapsed rows."""
    out = []
    for panel in dashboard.get("panels") or []:
        out.append(panel)
        out.extend(panel.get("panels") or [])
    return out


def dashboard_targets(dashboard: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of every panel."""
    return [(panel, target) for panel in dashboard_panels(dashboard) for target in panel.get("targets") or []]


def dashboard_variable_selector(variable: dict[str, Any]) -> str:
    """The series selector of a `label_values(<selector>, <label>)` query variable."""
    query = variable["query"]
    query = query["query"] if isinstance(query, dict) else query
    match = re.fullmatch(r"label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)", query.strip())
    assert match, f"variable {variable['name']}: {query!r} is not label_values(<selector>, <label>)"
    return match.group(1)


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL expression the dashboard sends, as Grafana sends it: the panels'
    queries and the query variables' selectors."""
    exprs = [grafana_promql(target["expr"]) for _, target in dashboard_targets(dashboard)]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(dashboard_variable_selector(variable))
    return exprs


def rule_exprs(rendered: Rendered) -> dict[str, str]:
    """The PrometheusRule's alert expressions by alert name."""
    (rule,) = rendered.kind("PrometheusRule")
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
