"""Agents for the command-line tests (``python -m adk.serve tests.serve.cli_target:build``).

``held`` calls a tool that blocks until the file named by ``$PYEINO_SERVE_GATE`` can be locked shared (the test
holds it exclusively); ``payer`` pauses for approval.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

import anyio

from adk import ChatModelAgent
from compose import tool
from tests.serve.helpers import PolicyModel, calling, tool_results


@tool
async def held(city: str) -> str:
    """Blocks until the test lets it go.

    Args:
        city: the city
    """

    def wait() -> None:
        with open(os.environ["PYEINO_SERVE_GATE"]) as f:
            fcntl.flock(f, fcntl.LOCK_SH)

    await anyio.to_thread.run_sync(wait)
    return f"done for {city}"


@tool
async def pay(invoice: int) -> str:
    """Pay an invoice.

    Args:
        invoice: the invoice number
    """
    return f"paid invoice {invoice}"


def _round(call: tuple[str, str, str], answer: str) -> Any:
    return lambda messages: calling(call) if not tool_results(messages) else answer


def build() -> dict[str, Any]:
    return {
        "held": ChatModelAgent(
            "held",
            "waits",
            model=PolicyModel(_round(("h1", "held", '{"city": "Hangzhou"}'), "Held done.")),
            tools=[held],
        ),
        "payer": ChatModelAgent(
            "payer",
            "pays",
            model=PolicyModel(_round(("p1", "pay", '{"invoice": 7}'), "Paid.")),
            tools=[pay],
            approval=lambda name, _args: True,
        ),
    }
