"""Fixtures: the charts with their library dependency built, loaded once."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import helm_python as helm
import pytest

import chartkit


@pytest.fixture(scope="session")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chartkit.prepare_charts(tmp_path_factory.mktemp("charts"))


@pytest.fixture(scope="session")
def chart(example_dir: Path) -> Iterator[helm.Chart]:
    with helm.Chart.load(example_dir) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def worker_chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kubeslice-worker-shaped fixture with hub-follower as its dependency."""
    return chartkit.prepare_fixture(tmp_path_factory.mktemp("fixture"))


@pytest.fixture(scope="session")
def worker_chart(worker_chart_dir: Path) -> Iterator[helm.Chart]:
    with helm.Chart.load(worker_chart_dir) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def plain_worker_chart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[helm.Chart]:
    """The same fixture as it is without hub-follower (no dependency, no wrap)."""
    with helm.Chart.load(chartkit.prepare_fixture(tmp_path_factory.mktemp("plain"), plain=True)) as loaded:
        yield loaded


@pytest.fixture(scope="session")
def post_renderer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """charts/hub-follower-post-renderer with its library dependency built."""
    return chartkit.prepare_post_renderer(tmp_path_factory.mktemp("post-renderer"))


@pytest.fixture(scope="session")
def post_renderer_chart(post_renderer_dir: Path) -> Iterator[helm.Chart]:
    with helm.Chart.load(post_renderer_dir) as loaded:
        yield loaded
