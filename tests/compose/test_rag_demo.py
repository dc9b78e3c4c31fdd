"""The offline RAG example, end to end: load, split, index, then retrieve -> prompt -> scripted model."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rag_demo", ROOT / "examples" / "rag.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def test_demo_answers_each_question_from_the_right_file() -> None:
    demo = load_demo()
    out = io.StringIO()
    answers = await demo.amain([], out=out)
    assert [a.sources[0].rsplit("_", 1)[0] for a in answers] == ["tea.txt", "west_lake.txt", "weather.txt"]
    assert "Broken Bridge" in answers[1].text and "umbrella" in answers[2].text
    assert out.getvalue().startswith("Indexed 8 chunks from data/")


async def test_demo_prompt_holds_top_k_chunks() -> None:
    demo = load_demo()
    index = await demo.build_index()
    hits = await index.retrieve("sunrise over the lake", top_k=1)
    [system, user] = demo.build_prompt({"docs": hits, "question": "q"})
    assert system.content.count("\n[") == 1 and hits[0].id in system.content and user.content == "q"


def test_demo_runs_as_a_script() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rag.py"), "--top-k", "1", "How long is a walk around the lake?"],
        capture_output=True, text=True, check=True, cwd=ROOT, timeout=60,
    )
    assert "about four hours" in proc.stdout
