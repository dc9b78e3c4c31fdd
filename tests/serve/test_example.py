"""examples/serve_agent.py: the travel agent served offline, paused for approval of its booking, then resumed."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pytest
from ag_ui_validate.pytest_plugin import assert_valid_agui

ROOT = Path(__file__).resolve().parents[2]


def test_round_trip() -> None:
    spec = importlib.util.spec_from_file_location("serve_agent_demo", ROOT / "examples" / "serve_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    import anyio

    out = io.StringIO()
    paused, resumed = anyio.run(module.demo, out, backend="asyncio")
    for run in (paused, resumed):
        assert_valid_agui(run, max_warnings=0)
    (pending,) = paused[-1]["outcome"]["interrupts"]
    assert pending["reason"] == "tool_call" and pending["toolCallId"] == "call_book"
    calls = [e["toolCallName"] for e in paused if e["type"] == "TOOL_CALL_START"]
    assert calls == ["get_weather", "search_places", "estimate_route", "book_tea_tasting"]
    results = [e for e in resumed if e["type"] == "TOOL_CALL_RESULT"]
    assert [r["toolCallId"] for r in results] == ["call_book"] and "TEA-0427" in results[0]["content"]
    assert resumed[-1]["result"].startswith("明天杭州一日游安排") and "Final answer" in out.getvalue()


if __name__ == "__main__":
    pytest.main([__file__])
