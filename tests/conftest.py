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
