"""Errors of building and compiling a graph."""

from __future__ import annotations

from typing import Any

from compose.errors._base import ComposeError

__all__ = ["GraphBuildError", "GraphCompiledError", "InvalidGraphError", "TypeMismatchError"]


class GraphBuildError(ComposeError):
    """Raised by a graph builder call (add node/edge/branch, compile) that cannot be honoured."""


class TypeMismatchError(GraphBuildError, TypeError):
    """Raised when an edge, branch or handler joins two incompatible types.

    Attributes name both ends and both types, e.g. ``graph edge[a]-[b]: start node's output type[int] and end
    node's input type[str] mismatch``.
    """

    def __init__(
        self,
        message: str,
        *,
        start: str | None = None,
        end: str | None = None,
        output_type: Any = None,
        input_type: Any = None,
    ) -> None:
        super().__init__(message)
        self.start = start
        self.end = end
        self.output_type = output_type
        self.input_type = input_type


class GraphCompiledError(GraphBuildError):
    """Raised when a graph is modified after ``compile()``."""

    def __init__(self, message: str = "graph has been compiled, cannot be modified") -> None:
        super().__init__(message)


class InvalidGraphError(GraphBuildError):
    """Raised by ``compile()`` for structural problems: a loop in DAG mode, an unreachable node, no start/end."""
