"""Print the README's zoo table: every zoo model on nv_small and nv_large.

    .venv/bin/python scripts/zoo_table.py [--json] [MODEL ...]

Each row calibrates on seeded random inputs, runs one more input on the
cmodel with every DLA tensor verified against the int8 CPU reference, and
compares the output with the fp32 host engine (tengine_host.zoo.report).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from tengine_host.zoo import MODELS
from tengine_host.zoo.report import evaluate, markdown


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=list(MODELS), help="zoo models (default all)")
    p.add_argument("--presets", default="nv_small,nv_large", help="comma-separated presets")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for preset in args.presets.split(","):
        for name in args.models:
            start = time.perf_counter()
            rows.append(evaluate(name, preset))
            print(f"{name} on {preset}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(json.dumps([r.as_dict() for r in rows], indent=1) if args.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
