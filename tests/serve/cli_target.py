"""Agents for the command-line tests (``python -m adk.serve tests.serve.cli_target:build``).

``held`` calls a tool that blocks until the file named by ``$PYEINO_SERVE_GATE`` can be locked shared (the test
holds it exclusively); ``payer`` pauses for approval.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

import anyio

from tests.serve.helpers import city_agent, city_tool, payer


@city_tool
async def held(city: str) -> str:
    """Blocks until the test lets it go."""

    def wait() -> None:
        with open(os.environ["PYEINO_SERVE_GATE"]) as f:
            fcntl.flock(f, fcntl.LOCK_SH)

    await anyio.to_thread.run_sync(wait)
    return f"done for {city}"


def build() -> dict[str, Any]:
    return {"held": city_agent("held", "waits", held, "Held done.", call_id="h1"), "payer": payer("Paid.")}
