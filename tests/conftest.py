"""Shared fixtures: where NVDLA's reference data lives, and skipping without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("OPENDLA_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """Path under ../shared, or skip the calling test with the reason."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"NVDLA reference data not found at {path} (set OPENDLA_SHARED or place "
                    f"'shared/' beside the repository)")
    return path


@pytest.fixture
def shared_dir() -> Path:
    return shared_path()


#: tiers whose tests take minutes, longest first: collected ahead of the rest, so that
#: with pytest-xdist (``make test``) they start at once and the quick tests fill the
#: other workers meanwhile instead of leaving one long test to run alone at the end.
#: The longest of all, the engine's bitstream build, is the first test of its file:
#: the worker that takes it has only the next, short, test queued behind it.
SLOW_FIRST = ("fpga", "rtl", "conformance")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        marks = {m.name for m in item.iter_markers()}
        return next((i for i, tier in enumerate(SLOW_FIRST) if tier in marks), len(SLOW_FIRST))

    items.sort(key=rank)      # stable: the order within a tier stays pytest's
