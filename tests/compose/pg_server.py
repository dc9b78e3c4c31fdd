"""A throwaway PostgreSQL server for the checkpoint store tests, started through ``.ci/postgres.sh``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "postgres.sh"


class PgUnavailable(Exception):
    """No PostgreSQL server could be started; the message says why."""


@dataclass
class PgServer:
    """A server the tests may use; ``state_dir`` is set when these tests started it (and may restart it)."""

    dsn: str
    state_dir: str | None = None

    @property
    def can_restart(self) -> bool:
        return self.state_dir is not None

    def restart(self) -> None:
        assert self.state_dir is not None, "only a server the tests started can be restarted"
        _script("restart", self.state_dir)

    def halt(self) -> None:
        """Stop the server, keeping its files: :meth:`start` brings it back (same port and data)."""
        assert self.state_dir is not None, "only a server the tests started can be halted"
        _script("halt", self.state_dir)

    def start(self) -> None:
        assert self.state_dir is not None, "only a server the tests started can be started again"
        _script("start", self.state_dir)

    def with_database(self, name: str) -> PgServer:
        """The same server, connecting to the database ``name``, created empty (dropped first if it exists)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return PgServer(database_dsn(self.dsn, name), self.state_dir)

    def stop(self) -> None:
        if self.state_dir is not None:
            _script("stop", self.state_dir)
            shutil.rmtree(self.state_dir, ignore_errors=True)


def database_dsn(dsn: str, name: str) -> str:
    """``dsn`` (a URL, as .ci/postgres.sh prints) with its database replaced by ``name``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"expected a postgresql:// URL, got {dsn!r}")
    return urlunsplit(parts._replace(path=f"/{name}"))


def start_pg_server() -> PgServer:
    """Start a server in a fresh directory under the system temp dir (readable by the `postgres` user)."""
    if shutil.which("bash") is None:
        raise PgUnavailable("bash is not available to run .ci/postgres.sh")
    # not pytest's tmp_path: /tmp/pytest-of-root is private to root, and the server may run as `postgres`
    state_dir = tempfile.mkdtemp(prefix="pyeino-pg-test-")
    try:
        out = _script("start", state_dir)
    except PgUnavailable:
        shutil.rmtree(state_dir, ignore_errors=True)
        raise
    prefix = "export PYEINO_TEST_PG_DSN="
    lines = [line for line in out.splitlines() if line.startswith(prefix)]
    if not lines:
        raise PgUnavailable(f".ci/postgres.sh printed no DSN: {out!r}")
    return PgServer(lines[-1].removeprefix(prefix), state_dir)


def _script(command: str, state_dir: str) -> str:
    env = {**os.environ, "PYEINO_PG_DIR": state_dir}
    env.pop("PYEINO_PG_PORT", None)
    proc = subprocess.run(
        ["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise PgUnavailable(f".ci/postgres.sh {command} failed (exit {proc.returncode}): {tail}")
    return proc.stdout
