"""tools/regroup.py on a small repository: the moves, the package it makes, the references it rewrites, and a
second run that changes nothing."""

from __future__ import annotations

import runpy
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "pyproject.toml": '[tool.setuptools]\npackages = ["pkg"]\n',
    "pkg/__init__.py": 'from pkg.graph import Graph\nfrom pkg.node import Node\n\n__all__ = ["Graph", "Node"]\n',
    "pkg/graph.py": '"""The builder."""\n\n__all__ = ["Graph"]\n\n\nclass Graph:\n    pass\n\n\n_private = 1\n',
    "pkg/node.py": (
        "from pkg.errors import NodeError\nfrom pkg.graph import Graph\nfrom pkg.mw import Middleware\n\n"
        '__all__ = ["Middleware", "Node", "NodeError"]\n\n\nclass Node(Graph):\n    middleware = Middleware\n'
    ),
    "pkg/mw.py": '__all__ = ["Middleware"]\n\n\nclass Middleware:\n    pass\n',
    "pkg/errors.py": "class NodeError(Exception):\n    pass\n",
    "tests/test_x.py": (
        "import pkg.mw\nfrom pkg.graph import Graph, _private\nfrom pkg.node import Middleware, Node\n\n\n"
        "def test_it(monkeypatch):\n"
        '    monkeypatch.setattr("pkg.mw.Middleware", object)\n'
        '    code = "from pkg.node import Node\\n"\n'
        "    assert Graph and _private and Node and Middleware and pkg.mw and code\n"
    ),
    "docs.md": "See `pkg/node.py` (:class:`pkg.node.Node`) and `pkg.graph.Graph`; node.py is old.\n",
}
MOVES = {"pkg.graph": "pkg.graph.builder", "pkg.node": "pkg.graph.node", "pkg.mw": "pkg.graph.mw"}


def _regroup() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(ROOT / "tools" / "regroup.py"), run_name="regroup_tool"))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    return tmp_path


def test_regroup_moves_reexports_and_rewrites(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tool = _regroup()
    packages = {"pkg.graph": tool.Package(doc="Graphs.", exports=tuple(MOVES.values()))}

    assert tool.main(["--dry-run", "--root", str(repo)], MOVES, packages) == 0
    assert "would move pkg/node.py -> pkg/graph/node.py" in capsys.readouterr().out
    assert _git(repo, "status", "--porcelain") == ""

    assert tool.main(["--root", str(repo)], MOVES, packages) == 0
    out = capsys.readouterr().out
    assert not (repo / "pkg" / "node.py").exists() and (repo / "pkg" / "graph" / "node.py").is_file()
    init = (repo / "pkg" / "graph" / "__init__.py").read_text()
    # what the parts define (NodeError is pkg.errors', re-exported by node: not the package's)
    assert '__all__ = [\n    "Graph",\n    "Middleware",\n    "Node",\n]' in init
    assert init.startswith('"""Graphs.\n"""')
    node = (repo / "pkg" / "graph" / "node.py").read_text()
    # the library imports from the defining module, never from its own package
    assert "from pkg.graph.builder import Graph\n" in node and "from pkg.graph.mw import Middleware\n" in node
    assert "from pkg.graph.node import Node\n" in (repo / "pkg" / "__init__.py").read_text()
    test = (repo / "tests" / "test_x.py").read_text()
    assert "from pkg.graph import Graph\n" in test  # the head's public path stays
    assert "from pkg.graph.builder import _private\n" in test
    assert "from pkg.graph.mw import Middleware\n" in test and "from pkg.graph.node import Node\n" in test
    assert "import pkg.graph.mw\n" in test and '"pkg.graph.mw.Middleware"' in test
    assert '"from pkg.graph.node import Node\\n"' in test
    docs = (repo / "docs.md").read_text()
    assert docs.startswith("See `pkg/graph/node.py` (:class:`pkg.graph.node.Node`) and `pkg.graph.Graph`;")
    assert "docs.md:1" in out  # the bare old file name is reported, not guessed at
    assert '"pkg.graph"' in (repo / "pyproject.toml").read_text()

    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "regrouped")
    assert tool.main(["--root", str(repo), "--no-check-imports"], MOVES, packages) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert _git(repo, "status", "--porcelain") == ""
