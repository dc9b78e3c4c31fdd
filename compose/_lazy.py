"""Names a package re-exports but imports on first use (PEP 562), to keep ``import compose`` cheap.

A package imports such names under ``TYPE_CHECKING`` (so type checkers and IDEs see them as ordinary imports)
and installs the pair this module builds, hidden from type checkers, which would otherwise accept any attribute
of the package::

    if typing.TYPE_CHECKING:
        from compose.models.openai_model import OpenAIChatModel
    else:
        __getattr__, __dir__ = lazy_names(__name__)

The ``TYPE_CHECKING`` block is the one list of the lazy names: read from the package's source on first use (as
SPEC 1's ``lazy_loader.attach_stub`` reads a stub), unless ``names`` (name -> defining module) is given. The
first access imports the defining module and stores the value in the package's namespace, so later accesses
(and ``from package import *``, which reads ``__all__``) are plain lookups.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str] | None = None
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (name -> defining module; default:
    the names its ``if TYPE_CHECKING:`` block imports)."""
    lazy = dict(names) if names is not None else None

    def table() -> dict[str, str]:
        nonlocal lazy
        if lazy is None:
            lazy = _type_checking_imports(sys.modules[package].__file__ or "")
        return lazy

    def __getattr__(name: str) -> object:
        module = table().get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table()})

    return __getattr__, __dir__


def _type_checking_imports(path: str) -> dict[str, str]:
    """Name -> module of the ``from module import name`` statements in the top-level ``if TYPE_CHECKING:`` blocks
    of the module at ``path``."""
    found: dict[str, str] = {}
    for node in ast.parse(Path(path).read_text(encoding="utf-8"), path).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    found.update({alias.asname or alias.name: stmt.module for alias in stmt.names})
    return found
