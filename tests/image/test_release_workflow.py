"""The release pipeline that makes the image (.github/workflows/release.yml), checked with
the real actionlint, built from the Go module pinned in tests/k8s/lint, and audited with
zizmor (tests/image/requirements.txt); and the chart's default image tag, which must be the
release's version."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
ACTIONLINT = ROOT / "target" / "tools" / "actionlint"
ZIZMOR = Path(sys.executable).parent / "zizmor"


@pytest.fixture(scope="module")
def actionlint() -> Path:
    if not ACTIONLINT.exists():
        if shutil.which("go") is None:
            pytest.skip("no Go toolchain to build actionlint from tests/k8s/lint")
        subprocess.run(["go", "build", "-o", str(ACTIONLINT), "github.com/rhysd/actionlint/cmd/actionlint"],
                       cwd=ROOT / "tests" / "k8s" / "lint", check=True, capture_output=True)
    return ACTIONLINT


def lint(actionlint: Path, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(actionlint), "-no-color", str(path)], capture_output=True, text=True, cwd=ROOT)


def test_the_release_workflow_passes_actionlint(actionlint):
    r = lint(actionlint, WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_broken_workflow(actionlint, tmp_path):
    # The linter is real: a typo in an expression and an unknown key are both reported.
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    text = WORKFLOW.read_text().replace("${{ steps.build.outputs.digest }}", "${{ steps.biuld.outputs.digest }}", 1)
    text = text.replace("    runs-on: ubuntu-24.04", "    runs-on: ubuntu-24.04\n    run-on: ubuntu-24.04", 1)
    broken.write_text(text)
    r = lint(actionlint, broken)
    assert r.returncode != 0
    assert "biuld" in r.stdout and "run-on" in r.stdout, r.stdout


@pytest.fixture(scope="module")
def zizmor() -> Path:
    if not ZIZMOR.exists():
        pytest.skip(f"no zizmor next to {sys.executable}: pip install -r tests/image/requirements.txt")
    return ZIZMOR


def audit(zizmor: Path, *paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(zizmor), "--offline", "--no-progress", "--color", "never", *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT)


def test_the_workflows_and_dependabot_config_pass_zizmor(zizmor):
    r = audit(zizmor, WORKFLOW.parent, DEPENDABOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_zizmor_catches_a_broken_workflow(zizmor, tmp_path):
    # The auditor is real: an action back on a tag and a checkout that keeps its credentials
    # are both reported.
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    text, pins = re.subn(r"docker/login-action@[0-9a-f]{40} # (v\S+)", r"docker/login-action@\1", WORKFLOW.read_text())
    assert pins == 1
    assert "        with:\n          persist-credentials: false\n" in text
    broken.write_text(text.replace("        with:\n          persist-credentials: false\n", "", 1))
    r = audit(zizmor, broken.parent)
    assert r.returncode != 0
    assert "unpinned-uses" in r.stdout and "artipacked" in r.stdout, r.stdout + r.stderr


def test_every_action_is_pinned_to_a_commit_and_dependabot_keeps_the_pins_current():
    uses = re.findall(r"^\s*(?:- )?uses: (.*)$", WORKFLOW.read_text(), re.M)
    assert uses
    for use in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", use), use
    config = DEPENDABOT.read_text()
    assert "package-ecosystem: github-actions" in config
    assert "interval: weekly" in config


def test_the_workflow_builds_multi_arch_pushes_by_digest_and_attaches_an_sbom_and_a_signature():
    text = WORKFLOW.read_text()
    assert "platforms: linux/amd64,linux/arm64" in text
    assert "push-by-digest=true" in text
    assert "sbom: true" in text
    assert re.search(r"cosign sign --yes \"\$\{IMAGE\}@\$\{DIGEST\}\"", text)
    assert "id-token: write" in text


def test_the_charts_default_tag_is_the_release_version():
    version = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    chart = (ROOT / "charts" / "hub-follower" / "Chart.yaml").read_text()
    values = (ROOT / "charts" / "hub-follower" / "values.yaml").read_text()
    assert f'appVersion: "{version}"' in chart.splitlines()
    assert f'  tag: "{version}"' in values.splitlines()
    # The workflow refuses a tag that disagrees with these three lines, as they are spelled.
    text = WORKFLOW.read_text()
    for check in ['version = \\"${version}\\"" Cargo.toml', 'appVersion: \\"${version}\\"" charts/hub-follower/Chart.yaml',
                  '  tag: \\"${version}\\"" charts/hub-follower/values.yaml']:
        assert check in text, check
    assert "env:\n  IMAGE: ghcr.io/kubeslice/hub-follower" in text
    assert "repository: ghcr.io/kubeslice/hub-follower" in values
