"""Worker processes and databases for the durable-run tests and the benchmark."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

HERE = Path(__file__).parent
ROOT = HERE.parents[2]


def env(log_db: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}",
        "PYEINO_TEST_LOG_DB": log_db,
        **extra,
    }


class Gate:
    """A lock file this process holds exclusively: the calls ``durable_app`` holds (``PYEINO_TEST_HOLD_CALLS``)
    say so on their worker's stdout and block on a shared lock of it until :meth:`release` (no polling)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "w")  # noqa: SIM115
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def env(self, *prefixes: str) -> dict[str, str]:
        """The worker environment holding the calls whose ids start with one of ``prefixes``."""
        return {"PYEINO_TEST_HOLD": str(self.path), "PYEINO_TEST_HOLD_CALLS": ",".join(prefixes)}

    def release(self) -> None:
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


class Worker:
    """``python -m adk.durable worker durable_app:<factory>``; started when constructed, ready when it returns."""

    def __init__(
        self,
        db: str,
        log_db: str,
        *,
        factory: str = "build",
        executor_id: str | None = None,
        queue: str | None = None,
        concurrency: int = 8,
        stderr: Path | None = None,
        wait: bool = True,
        **extra_env: str,
    ) -> None:
        create_tool_log(log_db)
        args = [
            sys.executable, "-m", "adk.durable", "worker", f"durable_app:{factory}", "--db", db,
            "--heartbeat", "0.2", "--dead-after", "1.5", "--concurrency", str(concurrency),
            "--app-version", "test",
        ]  # fmt: skip
        if executor_id is not None:
            args += ["--executor-id", executor_id]
        if queue is not None:
            args += ["--queue", queue]
        # stderr goes to a file, so a worker that does not start says why in the failure
        self._err_path = (
            stderr if stderr is not None else Path(tempfile.mkstemp(prefix="durable-worker-", suffix=".err")[1])
        )
        self._own_err = stderr is None
        self._err = open(self._err_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env(log_db, **extra_env)
        )
        self.executor_id = ""
        if wait:
            self.wait_ready()

    def wait_ready(self) -> Worker:
        """Wait for the worker's ``ready <executor id>`` line (a worker that did not start is stopped)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("ready "):
            code = self.proc.poll()
            err = self._err_path.read_text(errors="replace")[-2000:]
            self.stop()
            raise AssertionError(f"worker did not start (exit {code}): {line!r}\n{err}")
        self.executor_id = line.removeprefix("ready ")
        return self

    def held(self, n: int) -> list[tuple[str, str]]:
        """Wait until ``n`` calls of this worker are held at a ``Gate``; their (run id, call id).

        Only lines that do not start with ``held`` are skipped (a library writing to stdout); a ``held`` line
        that is not exactly ``held <run id> <call id>`` fails the test, naming it (``durable_app.say`` writes
        each line whole, so a torn line is a bug, not noise)."""
        assert self.proc.stdout is not None
        calls: list[tuple[str, str]] = []
        skipped: list[str] = []
        while len(calls) < n:
            line = self.proc.stdout.readline()
            if not line:
                err = self._err_path.read_text(errors="replace")[-2000:]
                code = self.proc.poll()
                raise AssertionError(
                    f"worker ended with {len(calls)} of {n} calls held (exit {code}); other stdout: {skipped!r}\n{err}"
                )
            if not line.startswith("held"):
                skipped.append(line)
                continue
            fields = line.split()
            if len(fields) != 3 or fields[0] != "held" or not line.endswith("\n"):
                raise AssertionError(f"a malformed held line on the worker's stdout: {line!r}")
            calls.append((fields[1], fields[2]))
        return calls

    @classmethod
    def many(cls, n: int, db: str, log_db: str, **kwargs: Any) -> list[Worker]:
        """``n`` workers: the first creates DBOS's system tables (two launches racing to create them on a new
        SQLite file can fail), then the others start at the same time. All are stopped if one does not start."""
        workers = [cls(db, log_db, **kwargs)]
        try:
            workers += [cls(db, log_db, wait=False, **kwargs) for _ in range(n - 1)]
            for w in workers[1:]:
                w.wait_ready()
        except BaseException:
            for w in workers:
                w.stop()
            raise
        return workers

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._close()

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()
        if self._own_err:
            self._err_path.unlink(missing_ok=True)


def fresh_pg_database(dsn: str) -> str:
    """A new, empty database on the server of ``dsn``; its URL."""
    import psycopg

    name = f"pyeino_durable_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(sa.make_url(dsn).set(database=name).render_as_string(hide_password=False))


def create_tool_log(log_db: str) -> None:
    """Create the ``tool_log`` table before the workers start (they would race to create it)."""
    url = sa.make_url(log_db)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as c:
            c.execute(sa.text("CREATE TABLE IF NOT EXISTS tool_log (run_id TEXT, call_id TEXT, pid INTEGER)"))
    finally:
        engine.dispose()


def tool_log(log_db: str) -> list[tuple[str, str, int]]:
    """Every recorded tool execution: (run id, call id, pid)."""
    url = sa.make_url(log_db)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            if not sa.inspect(c).has_table("tool_log"):
                return []
            return [tuple(r) for r in c.execute(sa.text("SELECT run_id, call_id, pid FROM tool_log"))]
    finally:
        engine.dispose()


def query(db: str, sql: str, **params: Any) -> list[Any]:
    url = sa.make_url(db)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return list(c.execute(sa.text(sql), params))
    finally:
        engine.dispose()
