"""The travel agent of ``examples/travel_agent.py``, built for evaluation: ``build(cassette)`` wraps its model and
tools on the cassette the evaluation runs on (``python -m adk.evals run ... --cassette``), and closes the model's
HTTP client when the evaluation ends (it is an async context manager).

The model is ``OpenAIChatModel`` (``OPENAI_MODEL``, default gpt-4o-mini; ``OPENAI_BASE_URL``; ``OPENAI_API_KEY``).
Replaying the committed cassette makes no request, so no key is needed then.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from adk import ChatModelAgent
from compose.models import OpenAIChatModel


def _demo() -> ModuleType:
    """``examples/travel_agent.py`` (its tools and instruction), loaded by path: examples/ is not a package."""
    name = "pyeino_example_travel_agent"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "travel_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def build(cassette: Any = None) -> AsyncIterator[ChatModelAgent]:
    """The travel agent, on ``cassette`` (a ``compose.testing.cassette``) when given."""
    demo = _demo()
    name = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    async with OpenAIChatModel(name, api_key=os.environ.get("OPENAI_API_KEY") or "replay-only") as openai:
        model: Any = openai
        tools = list(demo.TOOLS)
        if cassette is not None:
            model = cassette.wrap(model)
            tools = [cassette.wrap_tool(t) for t in tools]
        yield ChatModelAgent(
            "travel_agent",
            "plans day trips with weather, places and routes",
            demo.INSTRUCTION,
            model=model,
            tools=tools,
            max_iterations=10,
        )
