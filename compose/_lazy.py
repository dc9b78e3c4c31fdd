"""Names a package re-exports but imports on first use (PEP 562), to keep ``import compose`` cheap.

A package lists such names with the module that defines each, imports them under ``TYPE_CHECKING`` (so type
checkers and IDEs see them as ordinary imports), and installs the pair this module builds, hidden from type
checkers, which would otherwise accept any attribute of the package::

    if typing.TYPE_CHECKING:
        from compose.models.openai_model import OpenAIChatModel
    else:
        __getattr__, __dir__ = lazy_names(__name__, {"OpenAIChatModel": "compose.models.openai_model"})

The first access imports the defining module and stores the value in the package's namespace, so later accesses
(and ``from package import *``, which reads ``__all__``) are plain lookups.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (name -> defining module)."""
    lazy = dict(names)

    def __getattr__(name: str) -> object:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *lazy})

    return __getattr__, __dir__
