"""helm lint, the dependency wiring, and docs/helm.md against the charts."""

from __future__ import annotations

import re

import helm_python as helm
import pytest
import yaml

import chartkit


def findings(report):
    # Severity: 1 info, 2 warning, 3 error. Info ("icon is recommended") is allowed.
    return [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]


# restart-all with a regular sidecar is refused by the templates. helm lint cannot show
# that: in lint mode Helm's `fail` only logs its message and the render goes on, so
# that combination is left out here and its refusal is checked by rendering, in
# test_render_matrix.py.
LINT_COMBOS = [(m, n, w) for m in chartkit.MODES for n in (True, False) for w in (True, False)
               if not (m == "restart-all" and n is False)]


@pytest.mark.parametrize("mode,native,wrapper", LINT_COMBOS)
def test_example_chart_lints_clean(example_dir, mode, native, wrapper):
    report = helm.lint(example_dir, chartkit.mode_values(mode, native, wrapper), strict=True)
    assert report["total_charts_linted"] == 1
    assert findings(report) == []


@pytest.mark.parametrize("mode", chartkit.MODES)
@pytest.mark.parametrize("wrapper", [True, False])
def test_kubeslice_worker_fixture_lints_clean(worker_chart_dir, mode, wrapper):
    # helm-python-sdk's lint takes kube_version but does not apply it to the render
    # (even 1.18.0 against the chart's ">= 1.19.0-0" passes), so lint runs at the SDK's
    # default version; the version matrix is in test_kubeslice_worker.py.
    values = {"hubFollower": {"enabled": True, "restart": {"mode": mode}, "execWrapper": wrapper,
                              "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}}}
    report = helm.lint(worker_chart_dir, values, strict=True)
    assert report["total_charts_linted"] == 1
    assert findings(report) == []


def test_post_renderer_chart_lints_clean(post_renderer_dir, plain_worker_chart):
    # Lint renders the templates, which need manifests: the fixture's, as Helm would
    # hand them to the post-renderer.
    manifests = chartkit.post_renderer_input(chartkit.render_files(plain_worker_chart))
    values = {"manifests": manifests, "hubFollower": {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443",
                                                                                    "secretName": "kubeslice-hub-secondary"}}}
    report = helm.lint(post_renderer_dir, values, strict=True)
    assert report["total_charts_linted"] == 1
    assert findings(report) == []


def test_library_chart_lints_clean():
    report = helm.lint(chartkit.LIBRARY, strict=True)
    assert findings(report) == []


def test_lint_reports_a_bad_value(example_dir):
    report = helm.lint(example_dir, chartkit.hf(restart={"mode": "sometimes"}), strict=True)
    assert any("/restart/mode" in e for e in report["errors"]), report


def test_example_resolves_the_library_through_the_alias(example_dir):
    assert helm.dependency_list(example_dir) == [
        {"name": "hub-follower", "version": "0.1.0", "repository": "file://../hub-follower", "status": "ok"}
    ]
    with helm.Chart.load(example_dir) as fresh:
        (dep,) = fresh.dependencies
        assert (dep["name"], dep["type"]) == ("hub-follower", "library")
        assert fresh.metadata["dependencies"][0]["alias"] == "hubFollower"
        # At render time the library's defaults land under the alias, merged with
        # the example's own hubFollower values.
        rendered = chartkit.render(fresh)
        sidecar_env = chartkit.env(rendered.sidecar)
        assert sidecar_env["HUB_POLL_INTERVAL"] == "10s"  # library default
        assert sidecar_env["HUB_SECONDARY_HOST_ENDPOINT"] == "https://hub-2.example.com:6443"  # example


def test_library_defaults_are_valid_and_consistent():
    meta = yaml.safe_load((chartkit.LIBRARY / "Chart.yaml").read_text())
    values = yaml.safe_load((chartkit.LIBRARY / "values.yaml").read_text())
    assert meta["type"] == "library"
    # Library templates render in the parent, where .Chart is the parent's, so the
    # default tag is written out and must follow appVersion.
    assert values["image"]["tag"] == meta["appVersion"]
    assert values["enabled"] is False
    with helm.Chart.load(chartkit.LIBRARY) as library:
        library.validate_schema(library.values)


def test_docs_name_only_templates_the_library_defines():
    defined = set()
    for tpl in (chartkit.LIBRARY / "templates").glob("*.tpl"):
        defined |= set(re.findall(r'define "(hub-follower\.[A-Za-z]+)"', tpl.read_text()))
    docs = chartkit.DOCS.read_text()
    included = set(re.findall(r'include "(hub-follower\.[A-Za-z]+)"', docs))
    # A parent includes the wrap and, optionally, the notes; nothing else.
    assert included == {"hub-follower.inject", "hub-follower.notes"}
    assert included <= defined, included - defined
    # Every template the example uses is documented.
    example = "\n".join(p.read_text() for p in (chartkit.EXAMPLE / "templates").iterdir())
    assert set(re.findall(r'include "(hub-follower\.[A-Za-z]+)"', example)) <= included


def yaml_blocks():
    docs = chartkit.DOCS.read_text()
    return [d for b in re.findall(r"```yaml\n(.*?)```", docs, flags=re.S) for d in yaml.safe_load_all(b)]


def test_docs_show_values_the_schema_accepts():
    snippets = yaml_blocks()
    values = [s["hubFollower"] for s in snippets if isinstance(s, dict) and "hubFollower" in s]
    assert values, "docs/helm.md shows no hubFollower values"
    with helm.Chart.load(chartkit.LIBRARY) as library:
        for v in values:
            library.validate_schema(library.merge_values(v))


def test_docs_rbac_grants_what_the_sidecar_requests():
    # Probes `get` the Cluster; the watch lists and watches it with the field selector
    # metadata.name=<cluster>, which is what lets `resourceNames` cover list and watch.
    roles = [d for d in yaml_blocks() if isinstance(d, dict) and d.get("kind") == "Role"]
    assert roles, "docs/helm.md shows no Role"
    for role in roles:
        chartkit.validate_k8s(role)
        (rule,) = [r for r in role["rules"] if "clusters" in r["resources"]]
        assert rule["apiGroups"] == ["controller.kubeslice.io"]
        assert {"get", "list", "watch"} <= set(rule["verbs"]), rule
        assert len(rule["resourceNames"]) == 1
    bindings = [d for d in yaml_blocks() if isinstance(d, dict) and d.get("kind") == "RoleBinding"]
    assert {b["roleRef"]["name"] for b in bindings} == {r["metadata"]["name"] for r in roles}
    for binding in bindings:
        chartkit.validate_k8s(binding)
    assert "fieldSelector=metadata.name=" in chartkit.DOCS.read_text()


def test_docs_and_readme_show_the_patchs_wrap():
    # The integration documented is the one the patch makes, which the kubeslice-worker
    # fixture gets.
    assert chartkit.FIXTURE_WRAP in chartkit.DOCS.read_text()
    wrap = chartkit.patch_added_lines("templates/operator-deployment.yaml")
    assert wrap[-1] == chartkit.FIXTURE_WRAP
    # docs/helm.md shows the define first, then the end and the wrap, as the patch has them.
    section = chartkit.DOCS.read_text().split("\n## 1. ")[1].split("\n## 2. ")[0]
    shown = re.findall(r"```gotemplate\n(.*?)```", section, flags=re.S)[0].splitlines()
    assert [shown[0], *shown[-2:]] == wrap
    assert chartkit.FIXTURE_WRAP not in (chartkit.FIXTURE / "templates" / "operator-deployment.yaml").read_text()


def test_the_documented_minimal_values_are_enough(worker_chart):
    # The first hubFollower block in docs/helm.md and in the README's quick start.
    for doc in (chartkit.DOCS, chartkit.README):
        blocks = [d for b in re.findall(r"```yaml\n(.*?)```", doc.read_text(), flags=re.S) for d in yaml.safe_load_all(b)]
        (minimal, *_) = [b for b in blocks if isinstance(b, dict) and "hubFollower" in b]
        assert set(minimal["hubFollower"]) == {"enabled", "secondary"}, doc
        assert set(minimal["hubFollower"]["secondary"]) == {"endpoint", "secretName"}, doc
        for kube in ("1.33.0", "1.27.0"):
            r = chartkit.render(worker_chart, minimal, kube_version=kube)
            for d in r.docs:
                chartkit.validate_k8s(d, kube.rpartition(".")[0])
            assert r.sidecar["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "kubeslice-hub"


OPERATIONS = chartkit.REPO / "docs" / "operations.md"


def secondary_secret_names(text: str) -> dict[str, set[str]]:
    """The secondary hub's Secret as a text names it: in `secretName:` values and
    `secretKeyRef` names, and in `create secret generic` commands."""
    return {
        "secretName": set(re.findall(r"secretName: (kubeslice-hub-secondary[\w.-]*)", text)),
        "secretKeyRef": set(re.findall(r"name: (kubeslice-hub-secondary[\w.-]*)", text)),
        "created": set(re.findall(r"create secret generic (kubeslice-hub-secondary[\w.-]*)", text)),
        "named": set(re.findall(r'Secret "(kubeslice-hub-secondary[\w.-]*)"', text)),
    }


def test_one_name_for_the_secondary_secret_everywhere(chart):
    # The example chart's default is the name; every doc that sets the value or creates
    # the Secret uses it, so commands copied as written give the pod its mount.
    default = yaml.safe_load((chartkit.EXAMPLE / "values.yaml").read_text())["hubFollower"]["secondary"]["secretName"]
    sources = {
        "README.md": chartkit.README.read_text(),
        "docs/helm.md": chartkit.DOCS.read_text(),
        "docs/operations.md": OPERATIONS.read_text(),
        "charts/hub-follower/values.yaml": (chartkit.LIBRARY / "values.yaml").read_text(),
        "NOTES": chartkit.render(chart).notes,
    }
    seen = set()
    for source, text in sources.items():
        for where, names in secondary_secret_names(text).items():
            assert names <= {default}, (source, where, names)
            seen |= names
    assert seen == {default}
    assert secondary_secret_names(sources["NOTES"])["named"] == {default}
    # The Secret the README's and helm.md's values name is the one helm.md §4 and
    # operations.md create.
    for source in ("README.md", "docs/helm.md"):
        assert secondary_secret_names(sources[source])["secretName"] == {default}, source
    for source in ("docs/helm.md", "docs/operations.md"):
        assert secondary_secret_names(sources[source])["created"] == {default}, source


def readme_section(title: str) -> str:
    text = chartkit.README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_readme_first_screen_is_the_two_commands():
    text = chartkit.README.read_text()
    first = re.search(r"```sh\n(.*?)```", text, flags=re.S).group(1)
    assert [l.split("#")[0].strip() for l in first.splitlines()] == ["cargo run --example demo", "bash scripts/test"]
    assert text.index(first) < text.index("## Install on the published kubeslice-worker chart")


def test_readme_installs_in_at_most_12_commands():
    install = readme_section("Install on the published kubeslice-worker chart")
    commands = [line for block in re.findall(r"```sh\n(.*?)```", install, flags=re.S)
                for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) <= 12, commands
    # The checklist names every prerequisite that leaves a worker unprotected when missing.
    for needed in ("HA mode", "declares `status.activeController`", "reader Role on both hubs", "Standby's credential"):
        assert needed in install, needed


def test_helm_md_section_1_runs_helm_dependency_update(tmp_path):
    quick = chartkit.DOCS.read_text().split("\n## 1. ")[1].split("\n## 2. ")[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", quick, flags=re.S)
    kinds = [k for k, _ in blocks]
    # The dependency (yaml), then `helm dependency update` (sh), and the wrap (gotemplate),
    # before the values that turn it on.
    dep = next(i for i, (k, b) in enumerate(blocks) if k == "yaml" and "dependencies:" in b)
    update = next(i for i, (k, b) in enumerate(blocks) if k == "sh" and re.search(r"^helm dependency update \S+$", b, flags=re.M))
    values = next(i for i, (k, b) in enumerate(blocks) if k == "yaml" and "hubFollower:" in b)
    assert dep < update < values and kinds.index("gotemplate") < values
    assert 'no template "hub-follower.inject"' in quick
    # And that is what Helm says without it: the fixture with its dependency declared
    # but not fetched.
    with helm.Chart.load(chartkit.prepare_fixture(tmp_path, fetch=False)) as unfetched:
        message = chartkit.render_error(unfetched, {"hubFollower": {"enabled": True}})
    assert 'no template "hub-follower.inject"' in message


def test_operations_installs_with_one_include():
    text = OPERATIONS.read_text()
    installing = text[text.index("\n## Installing\n"):text.index("\n## Prerequisites on the hubs\n")]
    assert "one `include`" in installing and "hub-follower.inject" in installing
    assert not re.search(r"\bfew\b[^.]*include", installing), installing


def test_docs_show_the_notes_call_the_fixture_uses():
    # The NOTES call is the inject's dict, so the notes can name the patched workload.
    notes_call = chartkit.FIXTURE_WRAP.replace("hub-follower.inject", "hub-follower.notes")
    assert chartkit.patch_added_lines("templates/NOTES.txt") == [notes_call]
    assert notes_call in chartkit.DOCS.read_text()
    assert '{{ include "hub-follower.notes" . }}' not in chartkit.DOCS.read_text()
