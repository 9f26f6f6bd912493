"""The ``opendla`` command: one entry point, one module per subcommand.

Each module in :mod:`opendla.commands` defines ``add_parser(subparsers)`` and
``run(args) -> int``; they are registered here explicitly, by name, in the
order ``opendla --help`` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from opendla.errors import exit_status

# subcommand -> module under opendla.commands (imported only when used, so
# `opendla trace` does not pay for onnxruntime or amaranth imports)
COMMANDS: dict[str, str] = {
    "demo": "demo",
    "run": "run",
    "quantize": "quantize",
    "compare": "compare",
    "eval": "eval",
    "compile": "compile",
    "inspect": "inspect",
    "trace": "trace",
    "rtl": "rtl",
    "fpga": "fpga",
}


def _module(name: str):
    return importlib.import_module(f"opendla.commands.{COMMANDS[name]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``only`` limits it to one subcommand's module import."""
    parser = argparse.ArgumentParser(
        prog="opendla",
        description="Run ONNX models int8 on a simulated NVDLA; verify and build its RTL.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name, help=f"(see `opendla {name} --help`)")
            continue
        _module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    only = chosen if chosen in COMMANDS else None
    if only is None and not any(a in ("-h", "--help") for a in argv):
        only = "__none__"  # a bad/missing command: argparse reports it without imports
    parser = build_parser(None if only is None else only)
    args = parser.parse_args(argv)
    try:
        return int(_module(args.command).run(args) or 0)
    except BrokenPipeError:
        # the reader went away (`opendla ... | head`): stop quietly, as Unix tools do
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        status = exit_status(exc)
        if status is None:
            raise                   # not an error of the input: a bug, with its traceback
        print(f"error: {exc}", file=sys.stderr)
        return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
