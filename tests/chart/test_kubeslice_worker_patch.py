"""charts/kubeslice-worker-1.3.1.patch: the edits of docs/helm.md section 1, as a patch.

The fixture in the repository is plain; every test that renders it with hub-follower
gets it through this patch (chartkit.prepare_fixture). Here: the patch applies to the
plain fixture, carries nothing but the three edits and their boundary lines, makes
exactly the files the docs' three edits make, and refuses, loudly, a chart whose
boundary line differs.
"""

from __future__ import annotations

import re
from pathlib import Path

import helm_python as helm
import pytest
import yaml

import chartkit

FILES = ["Chart.yaml", "templates/operator-deployment.yaml", "templates/NOTES.txt"]


def test_the_patch_applies_to_the_plain_fixture(tmp_path):
    chartkit.apply_patch(chartkit.prepare_fixture(tmp_path, plain=True), check=True)


def test_the_patch_carries_one_line_of_context_per_hunk():
    text = chartkit.PATCH.read_text()
    assert chartkit.patched_files() == FILES
    hunks = re.split(r"^@@ .* @@$", text, flags=re.M)[1:]
    assert len(hunks) == 4
    for hunk in hunks:
        lines = [l for l in hunk.strip("\n").split("\n") if not l.startswith(("--- a/", "+++ b/"))]
        assert not any(l.startswith("-") for l in lines), hunk
        assert len([l for l in lines if l.startswith(" ")]) == 1, hunk


def docs_edits() -> tuple[dict, list[str], str]:
    """docs/helm.md section 1: the dependency, the lines around the template, the notes line."""
    section = chartkit.DOCS.read_text().split("\n## 1. ")[1].split("\n### ")[0]
    (dependency,) = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, flags=re.S) if "dependencies:" in b]
    wrap, (notes,) = [b.splitlines() for b in re.findall(r"```gotemplate\n(.*?)```", section, flags=re.S)]
    return dependency, [wrap[0], *wrap[-2:]], notes


def test_a_version_bump_does_not_stop_the_patch(tmp_path):
    # As on an upgrade to 1.3.2: only version and appVersion change in Chart.yaml.
    chart = chartkit.prepare_fixture(tmp_path, plain=True)
    path = chart / "Chart.yaml"
    path.write_text(path.read_text().replace("1.3.1", "1.3.2"))
    chartkit.apply_patch(chart, check=True)


def test_the_patched_fixture_is_the_docs_three_edits(tmp_path):
    dependency, (define, end, include), notes = docs_edits()
    plain = chartkit.prepare_fixture(tmp_path / "plain", plain=True)
    patched = chartkit.prepare_fixture(tmp_path / "patched", fetch=False)
    read = lambda chart, path: (chart / path).read_text()  # noqa: E731
    # Step 1: the dependency put first (compared as YAML: the docs' block has a comment).
    assert read(patched, "Chart.yaml").endswith(read(plain, "Chart.yaml"))
    assert yaml.safe_load(read(patched, "Chart.yaml")) == dict(yaml.safe_load(read(plain, "Chart.yaml")), **dependency)
    # Step 2: the unchanged template inside the define, rendered through the wrap.
    assert read(patched, FILES[1]) == f"{define}\n{read(plain, FILES[1])}{end}\n{include}\n"
    # The optional NOTES line.
    assert read(patched, FILES[2]) == f"{read(plain, FILES[2])}{notes}\n"
    # Nothing else differs.
    files = lambda chart: sorted(str(p.relative_to(chart)) for p in chart.rglob("*") if p.is_file())  # noqa: E731
    assert files(patched) == files(plain)
    for path in set(files(plain)) - set(FILES):
        assert read(patched, path) == read(plain, path), path


@pytest.mark.parametrize("boundary", ["Chart.yaml", "templates/operator-deployment.yaml"])
def test_a_chart_whose_boundary_line_changed_is_refused_with_gits_message(tmp_path, boundary):
    # A chart whose first line is not the one the patch expects (a comment put first).
    chart = chartkit.prepare_fixture(tmp_path, plain=True)
    path = chart / boundary
    text = path.read_text()
    changed = "# edited\n" + text
    assert changed != text
    path.write_text(changed)
    with pytest.raises(AssertionError, match=rf"(?s)git apply.*error: patch failed: {re.escape(boundary)}:\d+"):
        chartkit.apply_patch(chart, check=True)


def test_the_dependency_the_patch_declares_resolves(worker_chart_dir: Path):
    # What `helm dependency update` made of it; test_kubeslice_worker.py renders it.
    assert helm.dependency_list(worker_chart_dir) == [
        {"name": "hub-follower", "version": "0.1.0", "repository": "file://../hub-follower", "status": "ok"}
    ]
