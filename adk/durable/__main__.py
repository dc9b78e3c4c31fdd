"""``python -m adk.durable worker module:attr --db URL``: a worker process serving a durable app's queue.

``module:attr`` names the target: a ``ChatModelAgent``, another agent or a compiled graph, or a function of no
arguments returning one. The worker prints ``ready <executor id>`` once it serves the queue and stops on
SIGINT/SIGTERM (its unfinished runs are then taken over by the other workers at once).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from typing import Any

import anyio

from adk.durable._app import DEFAULT_QUEUE, DurableApp


def load_target(spec: str) -> Any:
    """The object ``module:attr`` names, called if it is a function (a factory)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"target must be module:attr (e.g. myapp.agents:build), got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not hasattr(obj, "invoke") and not hasattr(obj, "run"):
        obj = obj()
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


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    target = load_target(args.target)
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
        app.launch()
        anyio.run(_serve, app, backend="asyncio")
    finally:
        app.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
