"""examples/time_travel.py, offline: history on SQLite, a replay, an edit, stream modes."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def demo(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("time_travel_demo", ROOT / "examples" / "time_travel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def test_the_example_replays_edits_and_streams(demo: ModuleType, tmp_path: Path) -> None:
    out = io.StringIO()
    result = await demo.main(str(tmp_path / "history.db"), out=out)
    assert result["first"] == result["replayed"] == "TEA IS CALM IN A CUP."
    assert result["steps"] == [3, 2, 1, 0]
    assert result["edited"] == "COFFEE IS LOUD."
    assert "".join(result["tokens"]) == "Tea is calm in a cup."
    assert result["updates"] == ["outline", "write/model", "write", "polish"]
    assert "step 1: ran ['outline'], next ['write']" in out.getvalue()
