"""``LocalShell``: the ``execute`` tool's commands run by ``/bin/sh`` on this machine, opt-in only.

**This is no security boundary.** The command runs as this process's user with its rights: it can read and write
anything that user can, whatever the ``root`` it starts in. Use it for trusted models on throwaway machines, or
implement :class:`~adk.middlewares.filesystem.Shell` over a real sandbox (a container, a VM).

What it does bound: the working directory (``root``), the time (``timeout``: the command's process group is
killed after it) and the output kept (``max_output_bytes``: stdout and stderr combined; the rest is read and
dropped, and the response says it was cut).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import anyio
from anyio.abc import Process

from adk.middlewares.filesystem._search import check_bound
from adk.middlewares.filesystem.tools import ExecuteResponse

__all__ = ["LocalShell"]


class LocalShell:
    """Runs commands with ``/bin/sh -c`` in ``root`` (see the module docstring: not a sandbox).

    Args:
        root: the working directory of every command (a ``LocalBackend``'s root, typically).
        timeout: seconds before the command (its whole process group) is killed.
        max_output_bytes: the most output kept.
        env: the environment of the commands (default: this process's).

    Raises:
        ValueError: ``timeout`` is not a positive finite number (``nan`` would fail every call), or
            ``max_output_bytes`` not a positive integer.
        NotADirectoryError: ``root`` is not a directory.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 60.0,
        max_output_bytes: int = 100_000,
        env: dict[str, str] | None = None,
    ) -> None:
        check_bound("LocalShell", "timeout", timeout)
        check_bound("LocalShell", "max_output_bytes", max_output_bytes, integer=True)
        if not Path(root).is_dir():
            raise NotADirectoryError(f"LocalShell root {str(root)!r} is not a directory")
        self.root = str(root)
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.env = env

    def __repr__(self) -> str:
        return f"LocalShell({self.root!r}, timeout={self.timeout:g})"

    async def execute(self, command: str) -> ExecuteResponse:
        """Run ``command``; its combined output, exit code (None when killed at the timeout) and whether the
        output was cut."""
        kept = bytearray()
        truncated = False
        timed_out = False
        process = await anyio.open_process(
            ["/bin/sh", "-c", command],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            with anyio.move_on_after(self.timeout) as scope:
                assert process.stdout is not None
                async for chunk in process.stdout:
                    room = self.max_output_bytes - len(kept)
                    if len(chunk) > room:
                        truncated = True
                        kept += chunk[: max(room, 0)]
                    else:
                        kept += chunk
                await process.wait()
            timed_out = scope.cancelled_caught
        finally:
            if process.returncode is None:
                _kill_group(process)
                with anyio.CancelScope(shield=True):
                    await process.wait()
            await process.aclose()
        output = kept.decode("utf-8", "replace")
        if timed_out:
            note = f"[Command timed out after {self.timeout:g}s and was killed]"
            return ExecuteResponse(f"{output}\n{note}" if output else note, None, truncated)
        return ExecuteResponse(output, process.returncode, truncated)


def _kill_group(process: Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
