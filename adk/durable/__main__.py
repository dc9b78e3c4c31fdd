"""``python -m adk.durable worker module:attr --db URL``: a worker process serving a durable app's queue.

``module:attr`` names the target: a ``ChatModelAgent``, another agent or a compiled graph, or a function of no
arguments returning one. The worker prints ``ready <executor id>`` once it serves the queue and stops on
SIGINT/SIGTERM (its unfinished runs are then taken over by the other workers at once). Any number of workers
may start at the same time, also on a new database. A bad command line (the target cannot be imported or is not
an agent or graph, a bad option) prints one line and exits with status 2; a system database that cannot be
reached prints one line and exits with status 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import anyio

from adk.durable._app import DEFAULT_QUEUE, DurableApp


class UsageError(Exception):
    """A bad command line: printed as one ``python -m adk.durable: error: ...`` line, exit status 2."""


def load_target(spec: str) -> Any:
    """The object ``module:attr`` names, called if it is a function (a factory).

    Raises:
        UsageError: ``spec`` is not ``module:attr``, the module cannot be found, it has no such attribute, or the
            object is neither an agent nor a compiled graph.
    """
    from compose.runnable import Runnable

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"target must be module:attr (e.g. myapp.agents:build), got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not (module_name == e.name or module_name.startswith(e.name + ".")):
            raise  # the module exists but an import inside it failed: its traceback says where
        raise UsageError(f"cannot import the target module {module_name!r}: {e} (is it on PYTHONPATH?)") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not hasattr(obj, "invoke") and not hasattr(obj, "run"):
        obj = obj()
    if not isinstance(obj, Runnable) and not callable(getattr(obj, "run", None)):
        raise UsageError(
            f"{spec} is a {type(obj).__qualname__}, not an agent or a compiled graph (or a function returning one)"
        )
    return obj


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m adk.durable", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="serve a durable app's queue")
    w.add_argument("target", help="module:attr of the agent or graph (or a factory of it)")
    w.add_argument("--db", required=True, help="system database: sqlite:///path.db or postgresql://...")
    w.add_argument("--queue", default=DEFAULT_QUEUE)
    w.add_argument("--name", default="pyeino", help="DBOS application name")
    w.add_argument("--concurrency", type=int, default=8, help="runs at once in this worker")
    w.add_argument("--global-concurrency", type=int, default=None, help="runs at once across all workers")
    w.add_argument("--executor-id", default=None, help="reuse a dead worker's id to recover its runs at launch")
    w.add_argument("--heartbeat", type=float, default=1.0, help="seconds between heartbeats")
    w.add_argument("--dead-after", type=float, default=5.0, help="a worker silent this long is taken over")
    w.add_argument("--app-version", default=None, help="DBOS application version (default: code hash)")
    return p


async def _serve(app: DurableApp) -> None:
    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        print(f"ready {app.executor_id}", flush=True)
        await app.serve()


def _fail(message: str, status: int) -> NoReturn:
    print(f"python -m adk.durable: error: {message}", file=sys.stderr)
    raise SystemExit(status)


def _first_line(exc: BaseException) -> str:
    """The root cause of a database failure in one line (SQLAlchemy wraps the driver's error, DBOS logs both)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


@contextmanager
def _quiet_dbos() -> Iterator[None]:
    """DBOS logs a failed launch with every traceback (twice): the CLI prints one line itself."""
    logger = logging.getLogger("dbos")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def main(argv: list[str] | None = None) -> None:
    """Run the command line; bad usage (target, options) exits with status 2, an unreachable database with 1,
    each after one line on stderr."""
    args = _parser().parse_args(argv)
    for option in ("concurrency", "heartbeat", "dead_after"):
        if not getattr(args, option) > 0:
            _fail(f"--{option.replace('_', '-')} must be > 0, got {getattr(args, option)}", 2)
    if args.dead_after <= args.heartbeat:
        _fail(f"--dead-after ({args.dead_after}) must be longer than --heartbeat ({args.heartbeat})", 2)
    if not args.db.startswith(("sqlite:", "postgresql:", "postgres:", "postgresql+")):
        _fail(f"--db must be a sqlite:///path.db or postgresql://... URL, got {args.db!r}", 2)
    try:
        target = load_target(args.target)
    except UsageError as e:
        _fail(str(e), 2)
    app = DurableApp(
        target,
        db=args.db,
        name=args.name,
        queue=args.queue,
        worker_concurrency=args.concurrency,
        global_concurrency=args.global_concurrency,
        executor_id=args.executor_id,
        heartbeat_interval=args.heartbeat,
        dead_after=args.dead_after,
        application_version=args.app_version,
    )
    try:
        try:
            with _quiet_dbos():
                app.launch()
        except Exception as e:
            _fail(f"cannot launch on the system database {_safe_url(args.db)}: {_first_line(e)}", 1)
        anyio.run(_serve, app, backend="asyncio")
    finally:
        with _quiet_dbos():
            app.shutdown()


def _safe_url(db: str) -> str:
    """``db`` without its password."""
    import sqlalchemy as sa

    try:
        return sa.make_url(db).render_as_string(hide_password=True)
    except Exception:
        return repr(db)


if __name__ == "__main__":
    main(sys.argv[1:])
