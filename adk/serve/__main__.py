"""``python -m adk.serve module:build [--host 127.0.0.1] [--port 8000] [--db runs.db] [--grace 10] [--no-dev-ui]``:
serve agents over AG-UI on uvicorn, with the dev page at ``/`` (``--no-dev-ui``: without it).

``module:build`` names an agent, a Runner or a mapping of names to them, or a function of no arguments returning
one. Threads and paused runs are kept in ``--db``: a SQLite file (default ``runs.db`` in the working directory,
shared by the processes of one machine), a ``postgresql://`` URL (several server processes on one database
serve the same threads) or ``memory`` (this process only). With ``--durable [QUEUE]`` the runs go to the queue of
``adk.durable`` workers whose DBOS system database is ``--db`` (``python -m adk.durable worker ... --db`` the
same URL) and are streamed back from there (``adk.serve._durable``). The server prints ``serving <names> on
http://host:port`` once it listens; Ctrl-C or SIGTERM stops it taking requests and lets the runs in flight finish
for up to ``--grace`` seconds (then they are cancelled: their threads keep what they had before the run).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from adk.serve._app import create_app


def load_target(spec: str) -> Any:
    """What ``module:attr`` names, called if it is a plain function (a factory)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"target must be module:attr (e.g. myapp.agents:build), got {spec!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # as `python -m` users expect: modules of the working directory
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SystemExit(f"{module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not hasattr(obj, "run") and not isinstance(obj, type):
        obj = obj()
    return obj


def stores(db: str) -> tuple[Any, Any]:
    """The session and checkpoint stores for ``--db`` (``memory``: in this process only)."""
    if db == "memory":
        from adk.sessions import InMemorySessionStore
        from compose.checkpoint import InMemoryCheckPointStore

        return InMemorySessionStore(), InMemoryCheckPointStore()
    if db.startswith(("postgresql://", "postgres://")):
        from adk.sessions import PostgresSessionStore
        from compose.checkpoint import PostgresCheckPointStore

        return PostgresSessionStore(db), PostgresCheckPointStore(db)
    from adk.sessions import SQLiteSessionStore
    from compose.checkpoint import SQLiteCheckPointStore

    path = db.removeprefix("sqlite:///")
    return SQLiteSessionStore(path), SQLiteCheckPointStore(path)


def _ignore(signum: int, frame: Any) -> None:
    """The handler uvicorn finds (and calls once it has shut down): nothing more to do."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m adk.serve", description=__doc__)
    p.add_argument("target", help="module:attr of the agent, Runner or mapping (or a factory of one)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--db", default="runs.db", help="SQLite file, postgresql:// URL or 'memory' (threads, paused runs)")
    p.add_argument("--grace", type=float, default=10.0, help="seconds in-flight runs may take to finish on shutdown")
    p.add_argument("--cors", action="append", default=[], metavar="ORIGIN", help="allow this origin (repeatable)")
    p.add_argument("--no-dev-ui", dest="dev_ui", action="store_false", help="do not serve the dev page at /")
    p.add_argument(
        "--durable",
        metavar="QUEUE",
        nargs="?",
        const="pyeino",
        default=None,
        help="submit runs to the queue of the adk.durable workers on --db (its DBOS system database) instead of "
        "running them here",
    )
    return p


async def serve(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` and serve until Ctrl-C / SIGTERM (uvicorn installs the signal handlers)."""
    args = _parser().parse_args(argv)
    target = load_target(args.target)
    session_store, checkpoint_store = stores(args.db)
    durable: Any = None
    if args.durable is not None:
        from adk.durable import DurableClient

        system_db = args.db if "://" in args.db else f"sqlite:///{args.db}"
        durable = DurableClient(system_db, queue=args.durable)
    try:
        app = create_app(
            target,
            session_store=session_store,
            checkpoint_store=checkpoint_store,
            cors_origins=args.cors,
            dev_ui=args.dev_ui,
            durable=durable,
        )
        config = uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            timeout_graceful_shutdown=args.grace,
            log_level="warning",
            lifespan="off",
        )
        server = uvicorn.Server(config)
        names = ", ".join(sorted(app.state.server.agents))

        async def announce() -> None:
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.05)
            port = server.servers[0].sockets[0].getsockname()[1] if server.servers else args.port
            print(f"serving {names} on http://{args.host}:{port}", flush=True)

        # uvicorn restores the handlers it found and raises the signal again after its graceful shutdown: found
        # no-op handlers, a drained server ends normally (exit status 0, stores closed)
        previous = {sig: signal.signal(sig, _ignore) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(announce)
                await server.serve()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        await session_store.aclose()
        await checkpoint_store.aclose()
        if durable is not None:
            await durable.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    anyio.run(serve, argv, backend="asyncio")  # uvicorn runs on asyncio
    return 0


if __name__ == "__main__":
    sys.exit(main())
