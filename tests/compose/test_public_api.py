"""The public API: ``__all__`` lists exactly the public names, sorted, and each imports."""

from __future__ import annotations

import ast
import importlib
import tomllib
import types
from collections.abc import Iterator
from pathlib import Path

import pytest


def _public_packages() -> list[str]:
    """The packages pyproject ships whose names have no private part (new ones are checked as they come)."""
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        packages: list[str] = tomllib.load(f)["tool"]["setuptools"]["packages"]
    public = [p for p in packages if not any(part.startswith("_") for part in p.split(".")) and p not in _NOT_YET]
    return [*public, "compose.lowlevel"]


# these import helpers under public names (TYPE_CHECKING, lazy_names, one_chunk, ...) that __all__ rightly leaves out
_NOT_YET = {"compose.stream", "adk.agents", "adk.serve"}

# a root lists what a user reaches for first, and keeps importable (unlisted) every name of these namespaces: with
# its __all__ they cover every name it listed before issue #35 (errors, retrieval and ScriptedChatModel moved out)
_NAMESPACES = {"compose": ("compose.errors", "compose.components"), "adk": ("adk.errors",)}


def _namespaced(package: str) -> set[str]:
    moved = {"ScriptedChatModel"} if package == "compose" else set()
    return moved | {name for ns in _NAMESPACES.get(package, ()) for name in importlib.import_module(ns).__all__}


@pytest.mark.parametrize("package", _public_packages())
def test_all_is_exact_and_importable(package: str) -> None:
    mod = importlib.import_module(package)
    exported = list(mod.__all__)
    # dir() lists the names a package imports on first use (compose._lazy) as well as those it has imported
    public = {
        name
        for name in dir(mod)
        if not name.startswith("_")
        and not isinstance(getattr(mod, name), types.ModuleType)
        and name != "annotations"
    }
    assert set(exported) <= public
    assert public - set(exported) <= _namespaced(package), sorted(public - set(exported) - _namespaced(package))
    assert len(exported) == len(set(exported))
    for name in exported:
        assert getattr(mod, name) is not None
        exec(f"from {package} import {name}", {})


def test_roots_list_no_error_nor_retrieval_name_and_keep_the_moved_ones() -> None:
    from compose.errors import GraphInterrupt

    for package in _NAMESPACES:
        root = importlib.import_module(package)
        exported = [getattr(root, name) for name in root.__all__]
        errors = [v for v in exported if isinstance(v, type) and issubclass(v, Exception)]
        assert [e for e in errors if not issubclass(e, GraphInterrupt)] == []  # an interrupt is not a failure
        assert not (_namespaced(package) - {"GraphInterrupt"}) & set(root.__all__)
        for name in _namespaced(package):
            exec(f"from {package} import {name}", {})


def _imports(*packages: str) -> Iterator[tuple[str, str, list[str]]]:
    """``(where, module, names)`` of each absolute import in the packages' sources."""
    root = Path(__file__).resolve().parents[2]
    for path in sorted(f for package in packages for f in (root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield where, node.module, [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                yield from ((where, a.name, []) for a in node.names)


def test_adk_imports_nothing_private_from_compose() -> None:
    """adk reaches compose through public names only (the engine, ``compose._engine``, included): compose.lowlevel
    is the home of what it needs beyond the user's API."""
    private = [
        where
        for where, module, names in _imports("adk")
        if module.startswith("compose")
        if any(part.startswith("_") for part in [*module.split("."), *names])
    ]
    assert private == []


def test_every_imported_distribution_is_declared() -> None:
    """Each third-party module compose and adk import (optional ones too) comes from a distribution that
    pyproject declares, in the core dependencies or an extra."""
    import re
    import sys
    from importlib.metadata import packages_distributions

    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    requirements = [*project["dependencies"], *(r for e in project["optional-dependencies"].values() for r in e)]
    declared = {re.sub(r"[-_.]+", "-", re.split(r"[\[<>=;! ]", r)[0]).lower() for r in requirements}
    modules = {module.split(".")[0] for _, module, _ in _imports("compose", "adk")}
    third_party = modules - set(sys.stdlib_module_names) - {"compose", "adk", "__future__"}
    dists = packages_distributions()
    undeclared = [m for m in third_party if not {re.sub(r"[-_.]+", "-", d).lower() for d in dists[m]} & declared]
    assert undeclared == []


def test_importing_compose_does_not_import_test_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import compose, adk, sys; "
        "print(sorted(m for m in ('hypothesis', 'compose.testing', 'pytest') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cold_start_imports_no_optional_dependencies() -> None:
    """Importing compose and adk and building an agent on the scripted model imports neither the openai SDK nor
    networkx (compile time only) nor psycopg; the names that import them on first use still resolve."""
    import subprocess
    import sys

    code = """
import sys
import compose, adk
from compose import ScriptedChatModel, tool
from adk import ChatModelAgent, Runner

async def add_one(x: int) -> int:
    '''Add one.

    Args:
        x: the number.
    '''
    return x + 1

Runner(ChatModelAgent("a", "an agent", model=ScriptedChatModel(["hi"]), tools=[tool(add_one)]))
heavy = ("openai", "networkx", "psycopg", "psycopg_pool", "sqlite3", "compose.models.json_action", "jinja2")
print(sorted(m for m in heavy if m in sys.modules))

import compose.models
from compose.models.json_action import JSONActionChatModel
from compose.models.openai_model import OpenAIChatModel, translate_openai_error
assert compose.OpenAIChatModel is compose.models.OpenAIChatModel is OpenAIChatModel
assert compose.JSONActionChatModel is adk.JSONActionChatModel is JSONActionChatModel
assert compose.models.translate_openai_error is translate_openai_error
assert "OpenAIChatModel" in dir(compose) and "JSONActionChatModel" in dir(adk)
print("openai" in sys.modules)
try:
    compose.NoSuchName
except AttributeError as e:
    print(e)
namespace = {}
exec("from compose import *; from adk import *; from compose.models import *", namespace)
assert {*compose.__all__, *adk.__all__, *compose.models.__all__} <= namespace.keys()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True", "module 'compose' has no attribute 'NoSuchName'"]


def test_compile_imports_networkx_and_still_checks_the_graph() -> None:
    import subprocess
    import sys

    code = """
import sys
import compose
from compose import END, START, Graph, InvalidGraphError

async def step(x: str) -> str:
    return x

g = Graph(input_type=str, output_type=str)
g.add_lambda_node("a", step)
g.add_lambda_node("b", step)
g.add_edge(START, "a")
g.add_edge("a", "b")
g.add_edge("b", "a")
g.add_edge("b", END)
print("networkx" in sys.modules)
try:
    g.compile(trigger_mode="all_predecessor")
except InvalidGraphError as e:
    print(e)
print("networkx" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["False", "DAG is invalid, has loop: a -> b -> a", "True"]


def test_a_plain_agent_imports_no_deferred_module() -> None:
    """Cold start: importing compose and adk and building an agent leaves the openai SDK, OpenTelemetry and the
    built-in middlewares (filesystem, skills, summarization...) unimported until first use."""
    import subprocess
    import sys

    code = (
        "import sys, compose, adk\n"
        "adk.Runner(adk.ChatModelAgent('c', 'd', model=compose.ScriptedChatModel(['x'])))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    deferred = {
        "openai",
        "opentelemetry",
        "compose.models.openai_model",
        "adk.middlewares.filesystem",
        "adk.middlewares.agentsmd",
        "adk.middlewares.skill",
        "adk.middlewares.plantask",
        "adk.middlewares.summarization",
        "adk.middlewares.reduction",
        "adk.middlewares.toolsearch",
    }
    assert not deferred & loaded
    import adk

    assert adk.SummarizationMiddleware.__module__ == "adk.middlewares.summarization"  # still reachable
