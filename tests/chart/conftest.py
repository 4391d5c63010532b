"""Fixtures: the example chart with its library dependency built, loaded once."""

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
