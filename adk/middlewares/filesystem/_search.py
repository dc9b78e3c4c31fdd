"""The bounds of one ``glob`` or ``grep``: a deadline, and the grep worker process that can be killed at it.

Both searches run off the event loop: matching file names (``_glob``: linear time in a name, whatever the pattern)
and assembling grep's results in a worker thread that checks the deadline, and a cancellation of its caller,
before each file; matching the regex in a child process (``_grep_worker``), because a backtracking match cannot
be interrupted in the process that runs it. The child is killed at the deadline or when its caller is cancelled,
and always waited for.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio import open_process
from anyio.abc import Process

from adk.errors import FilesystemError, SearchLimitError

__all__ = ["Budget", "check_bound", "grep_in_worker"]

T = TypeVar("T")
_WORKER = str(Path(__file__).with_name("_grep_worker.py"))


def check_bound(owner: str, name: str, value: float, *, integer: bool = False) -> None:
    """Refuse a bound that is not a positive finite number (an integer when ``integer``).

    Raises:
        ValueError: naming ``owner`` and ``name``.
    """
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value <= 0:
        want = "a positive integer" if integer else "a positive finite number"
        raise ValueError(f"{owner} {name} must be {want}, got {value!r}")


class Budget:
    """The deadline of one search (``seconds`` from now): :meth:`check` raises
    :class:`~adk.errors.SearchLimitError` past it and, in a worker thread, the caller's cancellation."""

    def __init__(self, operation: str, pattern: str, path: str, seconds: float) -> None:
        self.operation = operation
        self.pattern = pattern
        self.path = path
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self._threaded = False
        self._calls = 0

    def __repr__(self) -> str:
        return f"Budget({self.operation} {self.pattern!r}, {self.remaining():.3g}s left)"

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.0)

    def over(self, problem: str) -> SearchLimitError:
        return SearchLimitError(self.operation, self.pattern, self.path, problem)

    def timed_out(self) -> SearchLimitError:
        return self.over(f"it took longer than {self.seconds:g}s (the backend's search_timeout)")

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise self.timed_out()
        self._calls += 1
        if self._threaded and self._calls % 16 == 0:
            anyio.from_thread.check_cancelled()

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args, check=self.check)`` in a worker thread."""

        def run() -> T:
            self._threaded = True
            try:
                return fn(*args, check=self.check)
            finally:
                self._threaded = False

        return await anyio.to_thread.run_sync(run)


async def grep_in_worker(
    regex: re.Pattern[str], multiline: bool, contents: list[str], budget: Budget, *, max_lines: int
) -> list[list[int]]:
    """For each of ``contents``, the numbers of its lines ``regex`` matches (see ``_grep_worker``), found in a
    child process killed at the budget's deadline.

    Raises:
        SearchLimitError: the deadline passed, or more than ``max_lines`` lines matched.
        FilesystemError: the worker failed.
    """
    if not contents:
        return []
    job = {
        "pattern": regex.pattern,
        "flags": regex.flags,
        "multiline": multiline,
        "files": contents,
        "max_lines": max_lines,
    }
    payload = await anyio.to_thread.run_sync(lambda: json.dumps(job).encode())
    out = bytearray()
    with anyio.move_on_after(budget.remaining()) as scope:
        process = await open_process(
            [sys.executable, "-I", "-S", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_feed, process, payload)
                assert process.stdout is not None
                async for chunk in process.stdout:
                    out += chunk
            await process.wait()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await process.aclose()
    if scope.cancelled_caught:
        raise budget.timed_out()
    if process.returncode != 0:
        raise FilesystemError(
            f"grep {budget.pattern[:100]!r} in {budget.path} failed: its worker process ended with exit code "
            f"{process.returncode}",
            budget.path,
        )
    result = await anyio.to_thread.run_sync(json.loads, bytes(out))
    if "over" in result:
        raise budget.over(f"more than {max_lines} lines matched")
    found: list[list[int]] = result["found"]
    return found


async def _feed(process: Process, payload: bytes) -> None:
    assert process.stdin is not None
    try:
        await process.stdin.send(payload)
        await process.stdin.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the worker ended early: its exit code says why
