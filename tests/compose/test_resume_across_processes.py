"""A run interrupted in one process (killed with SIGKILL right after the interrupt) resumes in a fresh process
from SQLite and from PostgreSQL: nothing lost (state, the finished tool's result) and no tool run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "workers" / "resume_worker.py"
ROOT = Path(__file__).parents[2]


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def run_then_resume(kind: str, where: str, log: Path) -> None:
    first = worker("run", kind, where, str(log))
    assert first.returncode == -9, first.stderr  # killed by SIGKILL right after the interrupt
    paused = json.loads(first.stdout.strip().splitlines()[-1])
    assert paused["address"] == "runnable:payments;node:tools;tool:pay:c2"
    assert paused["info"] == {"approve_payment": 42}
    second = worker("resume", kind, where, str(log), paused["id"])
    assert second.returncode == 0, second.stderr
    contents = json.loads(second.stdout.strip().splitlines()[-1])
    # the state written by the finished tool before the crash survived; its result was not recomputed
    assert contents == ["found invoice", "paid 42: approved", "looked up invoice"]
    assert log.read_text().splitlines() == ["lookup invoice", "pay 42 approved"]


def test_resume_in_a_fresh_process_from_sqlite(tmp_path: Path) -> None:
    run_then_resume("sqlite", str(tmp_path / "checkpoints.db"), tmp_path / "tools.log")


def test_resume_in_a_fresh_process_from_postgres(tmp_path: Path, pg_server: Any) -> None:
    run_then_resume("postgres", pg_server.dsn, tmp_path / "tools.log")
