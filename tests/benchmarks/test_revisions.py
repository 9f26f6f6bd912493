"""benchmarks/revisions.py reads the ratios out of dla_models.py's table."""

from __future__ import annotations

import subprocess

import pytest

from benchmarks import revisions


def _table(rows: list[tuple[str, float]], width: int = 26) -> str:
    """A table laid out as dla_models.py prints it (right-aligned under the titles)."""
    lines = [f"{'model':{width}s} {'nvdla ms':>9s} {'DLA part':>9s} {'ort fp32':>9s} "
             f"{'ort int8':>9s} {'nvdla/fp32':>10s} {'DLA/int8':>9s} {'goal':>5s}"]
    lines += [f"{name:{width}s} {12.3:9.1f} {10.0:9.1f} {11.0:9.1f} {3.0:9.1f} {ratio:10.2f} "
              f"{3.3:9.2f} {'<=1.5':>5s}   1 subgraph" for name, ratio in rows]
    lines += ["fixed cost of one small conv+SDP op: 0.064 ms (40 ops in 2.6 ms; goal <= 0.1 ms)",
              "RSS resnet18_cifar: 80.1 MiB after 1 inference, 80.3 MiB after 5 (+0.2 MiB)"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("width", [16, 26])     # an earlier revision's column, today's
def test_a_runs_ratios_and_fixed_cost_are_read(monkeypatch, width):
    done = subprocess.CompletedProcess([], 0, _table([("resnet18_cifar", 1.12),
                                                      ("yolox_nano", 2.95)], width), "")
    monkeypatch.setattr(revisions.subprocess, "run", lambda *a, **k: done)
    assert revisions.run_tree(revisions.REPO, []) == ({"resnet18_cifar": 1.12,
                                                       "yolox_nano": 2.95}, 0.064)


def test_a_failed_run_names_its_script(monkeypatch):
    done = subprocess.CompletedProcess([], 1, "", "Traceback: boom")
    monkeypatch.setattr(revisions.subprocess, "run", lambda *a, **k: done)
    with pytest.raises(RuntimeError, match="dla_models.py exited 1:\nTraceback: boom"):
        revisions.run_tree(revisions.REPO, [])
