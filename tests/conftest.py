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


#: thread pools sized by environment variables, for the processes tests start
POOL_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker (``make test``) gets BLAS and OpenMP pools of one thread.

    Every worker is a process of its own, one per CPU: pools of one thread per CPU in
    each oversubscribe the machine, and OpenBLAS's spinning threads then wait for each
    other.  On this project's 2-CPU machine the conformance tests of whole models on the
    DLA took 179-207 s on two workers with pools of two threads, 56 s with pools of one.
    The processes the tests start inherit the variables."""
    if not hasattr(config, "workerinput"):
        return
    from threadpoolctl import threadpool_limits

    for name in POOL_VARIABLES:
        os.environ[name] = "1"
    threadpool_limits(limits=1)
