"""hub-follower.inject against the ways a parent's manifests can be written: line
endings, separators, a worker that is missing, and a StatefulSet worker. None of them
may run two documents together silently, and each refusal names its reason."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import helm_python as helm
import pytest

import chartkit

SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary-token"}
ON = {"hubFollower": {"enabled": True, "secondary": SECONDARY}}
CONFIGMAP = "kubeslice-worker-event-schema-conf"


def fixture_with(tmp_path: Path, change: Callable[[str], str]) -> Path:
    """The kubeslice-worker fixture with its operator template changed by `change`."""
    chart_dir = chartkit.prepare_fixture(tmp_path)
    template = chart_dir / "templates" / "operator-deployment.yaml"
    text = template.read_text()
    changed = change(text)
    assert changed != text, "the change did not apply"
    template.write_bytes(changed.encode())
    return chart_dir


def render(chart_dir: Path, values=ON) -> chartkit.Rendered:
    with helm.Chart.load(chart_dir) as chart:
        return chartkit.render(chart, values)


def render_error(chart_dir: Path, values=ON) -> str:
    with helm.Chart.load(chart_dir) as chart:
        return chartkit.render_error(chart, values)


def assert_both_documents_whole(r: chartkit.Rendered) -> None:
    assert r.deployment["metadata"]["name"] == "kubeslice-operator"
    assert r.sidecar["name"] == "hub-follower"
    (configmap,) = [c for c in r.kind("ConfigMap") if c["metadata"]["name"] == CONFIGMAP]
    assert configmap["data"] == {"worker.yaml": "disabledEvents:\n- LicenseSecretNotFound"}
    # The ConfigMap is its own document, not keys swallowed into the Deployment.
    assert "data" not in r.deployment


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_line_endings_never_merge_documents(tmp_path, newline):
    r = render(fixture_with(tmp_path, lambda t: t.replace("\n", newline)))
    assert_both_documents_whole(r)
    assert "\r" not in chartkit.yaml.safe_dump(r.docs)


@pytest.mark.parametrize("separator", ["\n---\r\n", "\r---\r", "\u2028---\u2028", "\u0085---\u0085"],
                         ids=["crlf", "cr", "line-separator", "next-line"])
def test_a_separator_line_of_any_line_break_keeps_the_configmap(tmp_path, separator):
    # Only the separator line has the other break: the YAML parser (which knows the
    # breaks of YAML 1.1) would read it as a document start and keep the Deployment
    # alone, while a split on LF lines would not see it.
    r = render(fixture_with(tmp_path, lambda t: t.replace("\n---\n", separator, 1)))
    assert_both_documents_whole(r)


def test_a_separator_with_a_comment_is_a_separator(tmp_path):
    r = render(fixture_with(tmp_path, lambda t: t.replace("\n---\n", "\n--- # the event schema\n", 1)))
    assert_both_documents_whole(r)


def test_a_document_end_marker_ends_the_document(tmp_path):
    # `...` ends a document; what follows it is the next one, with or without `---`.
    r = render(fixture_with(tmp_path, lambda t: t.replace("\n---\n", "\n...\n", 1)))
    assert_both_documents_whole(r)


@pytest.mark.parametrize("separator", ["--- !tag", "--- !!map", "--- |", "--- {}"])
def test_a_separator_that_carries_content_is_refused(tmp_path, separator):
    message = render_error(fixture_with(tmp_path, lambda t: t.replace("\n---\n", f"\n{separator}\n", 1)))
    assert f'hub-follower.inject: the document separator "{separator}" carries content' in message
    assert "write `---` alone on its line" in message


def test_a_separator_that_carries_content_is_refused_with_crlf(tmp_path):
    message = render_error(fixture_with(tmp_path, lambda t: t.replace("\n---\n", "\n--- !tag\n", 1).replace("\n", "\r\n")))
    assert 'the document separator "--- !tag" carries content' in message


def test_dropping_the_workers_deployment_fails_naming_what_is_there(tmp_path):
    # The parent's template renders the ConfigMap alone: no worker to add hub-follower to.
    def drop(text: str) -> str:
        head, sep, tail = text.partition("apiVersion: apps/v1\nkind: Deployment\n")
        deployment, _, rest = tail.partition("\n---\n")
        return head + rest

    message = render_error(fixture_with(tmp_path, drop))
    assert 'no Deployment or StatefulSet in the manifests has a container named "manager"' in message
    assert f"they hold only: ConfigMap {CONFIGMAP}" in message
    assert "Pass the worker's Deployment through hub-follower.inject" in message


def test_manifests_that_render_nothing_fail_saying_so(tmp_path):
    chart_dir = fixture_with(tmp_path, lambda t: t.replace('(include "kubeslice-worker.operator" .)', '""', 1))
    message = render_error(chart_dir)
    assert "hub-follower.inject: the manifests are empty" in message


def test_two_workers_are_refused_naming_both(tmp_path):
    def twice(text: str) -> str:
        start = text.index("apiVersion: apps/v1\nkind: Deployment\n")
        end = text.index("\n---\n", start)
        copy = text[start:end].replace("name: kubeslice-operator", "name: kubeslice-operator-2", 1)
        return text[:end] + "\n---\n" + copy + text[end:]

    message = render_error(fixture_with(tmp_path, twice))
    assert 'more than one workload has a container named "manager"' in message
    assert "Deployment kubeslice-operator, Deployment kubeslice-operator-2" in message


def statefulset(text: str) -> str:
    return text.replace("kind: Deployment\n", "kind: StatefulSet\n", 1).replace(
        "spec:\n  replicas: 1\n", "spec:\n  serviceName: kubeslice-operator\n  replicas: 1\n", 1
    )


@pytest.mark.parametrize("mode", chartkit.MODES)
def test_a_statefulset_worker_is_patched_like_a_deployment(tmp_path, worker_chart, mode):
    values = {"hubFollower": dict(ON["hubFollower"], restart={"mode": mode}, metrics={"podMonitor": {"enabled": True}})}
    as_deployment = chartkit.render(worker_chart, values)
    r = render(fixture_with(tmp_path, statefulset), values)
    assert r.kind("Deployment") == []
    (sts,) = r.kind("StatefulSet")
    # The pod template is patched exactly as the Deployment's is.
    assert sts["spec"]["template"] == as_deployment.deployment["spec"]["template"]
    assert sts["spec"]["template"]["spec"] != chartkit.render(worker_chart).pod
    # The documents hub-follower adds name the StatefulSet.
    (role,) = [d for d in r.kind("Role") if d["metadata"]["name"] == "kubeslice-operator-hub-follower-events"]
    (monitor,) = r.kind("PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    assert "port-forward statefulset/kubeslice-operator 8095" in r.notes
    for d in r.docs:
        if d["kind"] != "PodMonitor":
            chartkit.validate_k8s(d)


def test_notes_name_the_patched_workload(worker_chart, chart):
    notes = chartkit.render(worker_chart, ON).notes
    assert "kubectl -n kubeslice-system port-forward deployment/kubeslice-operator 8095" in notes
    assert "kubectl -n kubeslice-system exec deployment/kubeslice-operator -c hub-follower -- /hub-follower check" in notes
    example = chartkit.render(chart).notes
    assert "port-forward deployment/demo-worker 8095" in example
    for text in (notes, example):
        assert "<worker>" not in text and "<the worker's Deployment>" not in text
