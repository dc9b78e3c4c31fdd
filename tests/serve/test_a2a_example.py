"""examples/a2a_pair.py: a supervisor delegating over A2A to the served travel agent, paused on the remote
approval and resumed (in one process on loopback; asyncio only: the a2a-sdk's server runs on asyncio)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]


def test_a2a_pair() -> None:
    spec = importlib.util.spec_from_file_location("a2a_pair_demo", ROOT / "examples" / "a2a_pair.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = io.StringIO()
    seen = anyio.run(module.demo, out, backend="asyncio")
    assert seen["paused"]["reason"] == "tool_call" and "book_tea_tasting" in seen["paused"]["message"]
    assert seen["tool_result"].startswith("明天杭州一日游安排")  # the remote agent's answer, after its booking
    assert seen["answer"] == "Here is the plan from the travel agent."
    assert "remote agent: travel_agent: plans day trips" in out.getvalue()
