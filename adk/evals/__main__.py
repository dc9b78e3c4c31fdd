"""``python -m adk.evals run DATASET TARGET [options]``: evaluate, print the table, exit 0 (passed), 1 (failed) or
2 (usage error: bad arguments, a dataset or target that cannot be loaded)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from adk.errors import DatasetError
from adk.evals._dataset import Dataset
from compose.errors import CassetteError

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MODES = ("once", "none", "all", "new")


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m adk.evals", description="Evaluate an agent on a dataset.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a dataset's cases and score them")
    run.add_argument("dataset", help="the dataset file (.yaml, .yml or .json)")
    run.add_argument(
        "target",
        help="module:attr (or path/to/file.py:attr): an agent, a Runner, a compiled graph, or a function returning "
        "one (given the cassette when it takes an argument)",
    )
    run.add_argument("--concurrency", type=int, default=4, help="runs at once (default 4)")
    run.add_argument("--repeat", type=int, default=1, help="runs per case (default 1)")
    run.add_argument("--cassette", metavar="PATH", help="record/replay the runs on this cassette file")
    run.add_argument("--cassette-mode", choices=MODES, default="once", help="the cassette's mode (default once)")
    run.add_argument("--html", metavar="PATH", help="write the HTML report here")
    run.add_argument("--json", metavar="PATH", help="write the JSON report here")
    run.add_argument("--min-pass-rate", type=float, help="override the dataset's min_pass_rate (0..1)")
    return parser


def load_target(ref: str) -> Any:
    """The object named ``module:attr`` or ``path/to/file.py:attr`` (the current directory is importable)."""
    module_name, sep, attr = ref.rpartition(":")
    if not sep or not module_name or not attr:
        raise _UsageError(f"target must be module:attr or path/to/file.py:attr, got {ref!r}")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise _UsageError(f"target file {path} does not exist")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")
            module = importlib.import_module(module_name)
        value: Any = module
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise _UsageError(f"cannot load target {ref!r}: {exc}") from None
    return value


async def _run(args: argparse.Namespace) -> int:
    try:
        dataset = Dataset.from_file(args.dataset)
    except DatasetError as exc:
        raise _UsageError(str(exc)) from None
    if args.min_pass_rate is not None:
        if not 0.0 <= args.min_pass_rate <= 1.0:
            raise _UsageError(f"--min-pass-rate must be in [0, 1], got {args.min_pass_rate}")
        dataset.min_pass_rate = args.min_pass_rate
    if args.concurrency < 1 or args.repeat < 1:
        raise _UsageError("--concurrency and --repeat must be at least 1")
    target = load_target(args.target)
    tape = None
    if args.cassette is not None:
        from compose.testing.cassette import Cassette

        tape = Cassette(args.cassette, args.cassette_mode)
    try:
        report = await dataset.evaluate(target, concurrency=args.concurrency, repeat=args.repeat, cassette=tape)
    except (TypeError, CassetteError) as exc:  # not a target; a cassette that cannot be opened
        raise _UsageError(str(exc)) from None
    report.print()
    if args.json:
        report.to_json(args.json)
    if args.html:
        report.to_html(args.html)
    return EXIT_PASSED if report.passed else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns the exit status."""
    args = _parser().parse_args(argv)  # exits 2 on bad arguments
    try:
        return anyio.run(_run, args)
    except _UsageError as exc:
        print(f"python -m adk.evals: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
