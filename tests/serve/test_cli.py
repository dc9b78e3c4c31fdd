"""``python -m adk.serve``: real server processes on uvicorn. The protocol's validator CLI against the live
endpoint, graceful drain on SIGTERM, and threads shared by two processes on one store (a pause on one, its
resume on the other)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.serve.helpers import parse_sse, run_input, user

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def server(
    target: str, db: str, *extra: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    cmd = [sys.executable, "-m", "adk.serve", target, "--port", "0", "--db", db, *extra]
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving "), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield proc, line.split(" on ")[1].strip()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)  # waits, and closes the pipes


def test_validator_cli_on_the_example(tmp_path: Path) -> None:
    with server("examples.serve_agent:build", str(tmp_path / "runs.db")) as (_, url):
        done = subprocess.run(
            ["ag-ui-validate", f"{url}/agents/travel_agent/agui", "--max-warnings", "0", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert report["summary"]["errors"] == 0 and report["summary"]["warnings"] == 0


def test_sigterm_drains_the_run_in_flight(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.write_text("")
    with (
        open(gate) as held,
        server(
            "tests.serve.cli_target:build",
            str(tmp_path / "runs.db"),
            "--grace",
            "30",
            env={"PYEINO_SERVE_GATE": str(gate)},
        ) as (proc, url),
    ):
        fcntl.flock(held, fcntl.LOCK_EX)
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST", f"{url}/agents/held/agui", json=run_input("t-drain", "r1", [user("u1", "Go")])
            ) as response,
        ):
            lines = response.iter_lines()
            while '"TOOL_CALL_END"' not in next(lines):
                pass
            proc.send_signal(signal.SIGTERM)  # the run is in flight: the server drains it
            fcntl.flock(held, fcntl.LOCK_UN)
            rest = parse_sse("\n".join(lines))
        assert rest[-1]["type"] == "RUN_FINISHED" and rest[-1]["result"] == "Held done."
        assert proc.wait(timeout=30) == 0


@pytest.fixture(params=["sqlite", "postgres"])
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    pg = request.getfixturevalue("pg_server")
    return str(pg.dsn)


def test_two_processes_share_threads(shared_db: str) -> None:
    db = shared_db
    thread_id = f"t-shared-{os.getpid()}-{time.monotonic_ns()}"  # a PostgreSQL database outlives the test
    with (
        server("tests.serve.cli_target:build", db) as (_, first),
        server("tests.serve.cli_target:build", db) as (_, second),
        httpx.Client(timeout=30) as client,
    ):
        paused = parse_sse(
            client.post(f"{first}/agents/payer/agui", json=run_input(thread_id, "r1", [user("u1", "Pay")])).text
        )
        (pending,) = paused[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": pending["id"], "status": "resolved", "payload": {"approved": True}}]
        resumed = parse_sse(
            client.post(f"{second}/agents/payer/agui", json=run_input(thread_id, "r2", [], resume=resume)).text
        )
        thread = client.get(f"{first}/agents/payer/threads/{thread_id}").json()
    assert [r["content"] for r in resumed if r["type"] == "TOOL_CALL_RESULT"] == ["paid invoice 7"]
    assert resumed[-1]["result"] == "Paid."
    assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
