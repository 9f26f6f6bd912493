"""The simulation speed of this tree against an earlier revision, taking turns.

Usage::

    python benchmarks/revisions.py BASE [MODEL ...] [--rounds 3] [--repeat 20] [--preset nv_small]

Checks ``BASE`` (any git revision) out into a temporary worktree and runs the
``benchmarks/dla_models.py`` of each tree in turn, ``--rounds`` times, each run in
a process of its own importing that tree's packages (``PYTHONPATH``).  Every run
times the simulated DLA against onnxruntime fp32 in the same process, on one
thread, so its ratio ``nvdla / ort fp32`` cancels the machine's speed of the
moment; the two trees alternating cancels its drift.  Printed per model: the
median ratio of each tree and their quotient (this tree / base: 1.05 is 5 %
slower), and the same for the fixed cost of one small conv+SDP operation.

Both trees must print ``dla_models.py``'s table (the columns of its header).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path("benchmarks") / "dla_models.py"


def _numbers(words: list[str]) -> bool:
    try:
        [float(w) for w in words]
    except ValueError:
        return False
    return bool(words)


def run_tree(tree: Path, args: list[str]) -> tuple[dict[str, float], float | None]:
    """One run of ``tree``'s benchmark: ``{model: nvdla / ort fp32}`` and the fixed cost
    of one small operation in ms (None when the run did not time it)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(tree / SCRIPT), *args], cwd=tree, env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{tree / SCRIPT} exited {out.returncode}:\n{out.stderr[-2000:]}")
    lines = out.stdout.splitlines()
    header = next((ln for ln in lines if ln.startswith("model")), "")
    if "nvdla/fp32" not in header:
        raise RuntimeError(f"{tree / SCRIPT} printed no table:\n{out.stdout[-2000:]}")
    # the columns are right-aligned under their titles: a row's ratio ends where the title does
    end = header.index("nvdla/fp32") + len("nvdla/fp32")
    ratios, per_op = {}, None
    for ln in lines:
        if ln.startswith("fixed cost"):
            words = ln.split()
            per_op = float(words[words.index("op:") + 1])
        elif ln is not header and ln.strip():
            name = ln.split()[0]
            words = ln[len(name):end].split()           # "-": onnxruntime's int8 is missing
            if _numbers([w for w in words if w != "-"]) and words[-1] != "-":  # a model's row
                ratios[name] = float(words[-1])
    return ratios, per_op


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the git revision to compare with (e.g. a commit or tag)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each tree (default 3)")
    p.add_argument("--preset", default="nv_small")
    p.add_argument("--repeat", type=int, default=20, help="inferences per run and model")
    p.add_argument("models", nargs="*", help="zoo models (default: dla_models.py's)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: at least 1")
    bench = [*args.models, "--preset", args.preset, "--repeat", str(args.repeat)]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        made = subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(base),
                               args.base], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            p.error(f"cannot check out {args.base!r}: {made.stderr.strip()}")
        try:
            runs: dict[str, list[tuple[dict[str, float], float | None]]] = {"this": [],
                                                                            "base": []}
            for r in range(args.rounds):
                for name, tree in (("base", base), ("this", REPO)):
                    print(f"round {r + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
                    runs[name].append(run_tree(tree, bench))
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           capture_output=True, check=False)
    print(f"{'model':16s} {'base':>8s} {'this':>8s} {'this/base':>10s}   "
          f"(nvdla / ort fp32, median of {args.rounds})")
    for model in runs["this"][0][0]:
        b = statistics.median(r[model] for r, _ in runs["base"])
        t = statistics.median(r[model] for r, _ in runs["this"])
        print(f"{model:16s} {b:8.2f} {t:8.2f} {t / b:10.3f}")
    ops = [[o for _, o in runs[k] if o is not None] for k in ("base", "this")]
    if all(ops):
        b, t = statistics.median(ops[0]), statistics.median(ops[1])
        print(f"{'small op (ms)':16s} {b:8.3f} {t:8.3f} {t / b:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
