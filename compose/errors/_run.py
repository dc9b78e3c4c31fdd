"""Errors of a compiled graph's run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compose._types import type_name
from compose.errors._base import ComposeError

__all__ = [
    "BranchError",
    "FanInMergeError",
    "FieldMappingError",
    "FieldMappingTypeError",
    "GraphRunError",
    "MaxStepsExceededError",
    "NodeOutputTypeError",
    "NodeRunError",
    "RuntimeTypeError",
    "StateError",
    "StateUpdateError",
]


class GraphRunError(ComposeError):
    """Base class of failures while a compiled graph runs."""


class MaxStepsExceededError(GraphRunError):
    """Raised when a Pregel run needs more supersteps than ``max_run_steps`` allows."""

    def __init__(self, max_steps: int) -> None:
        super().__init__(f"[GraphRunError] exceeds max steps ({max_steps})")
        self.max_steps = max_steps


class NodeRunError(GraphRunError):
    """Raised when a node, its state handler or its input conversion fails.

    ``node_path`` lists node keys from the outermost graph down to the failing node; the original exception is
    ``__cause__``. ``phase`` says what failed: ``""`` (the node), ``"pre handler"``, ``"post handler"``,
    ``"output"`` (:class:`NodeOutputTypeError`) or ``"stream"``: an error inside the node's output stream in a
    streaming run (the model's connection broke, a tool failed mid-stream), named once after the node that
    produced the stream and raised as it is wherever the stream is read (by the next node, a handler, a branch,
    the caller).
    """

    _origin: object = None  # the run whose stream named it (compose._engine.blame); None for other errors

    def __init__(self, node_path: Sequence[str], cause: BaseException, *, phase: str = "") -> None:
        self.node_path = list(node_path)
        self.phase = phase
        where = f" {phase}" if phase else ""
        super().__init__(
            f"[NodeRunError] node{where} failed: {type(cause).__name__}: {cause}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]"
        )
        self.__cause__ = cause

    def with_parent(self, key: str) -> NodeRunError:
        """Return the same error with ``key`` prepended to the node path (used as it rises through sub-graphs)."""
        cause = self.__cause__
        assert cause is not None
        err = NodeRunError([key, *self.node_path], cause, phase=self.phase)
        err.__traceback__ = self.__traceback__
        return err


class BranchError(GraphRunError):
    """Raised when a branch condition fails or returns a node that is not one of its end nodes."""

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class RuntimeTypeError(GraphRunError, TypeError):
    """Raised when a value crossing an edge typed ``Any`` on one side is not of the type the other side needs."""


class NodeOutputTypeError(NodeRunError, RuntimeTypeError):
    """Raised when a node returns a value that is not of its declared output type, or its output stream yields
    such a chunk (then as an error item of the stream, where it is read); ``node_path`` names the node.

    Only concrete declared types are checked, with one shallow ``isinstance`` (``list[Message]``: a list; an
    ``int`` passes for ``float``); ``Any``, TypeVars, Protocols and ``Literal`` are not. A node with an
    ``output_key`` is checked on its value before it is wrapped. ``expected`` is the declared type, ``actual``
    the type of the value. There is no ``__cause__``: the node itself did not fail.
    """

    def __init__(self, node_path: Sequence[str], expected: Any, actual: type, *, chunk: bool = False) -> None:
        self.node_path = list(node_path)
        self.phase = "output"
        self.expected = expected
        self.actual = actual
        self.chunk = chunk
        what = "a chunk of the output stream" if chunk else "the output"
        key = self.node_path[-1] if self.node_path else ""
        GraphRunError.__init__(
            self,
            f"[NodeRunError] runtime type check fail on {what} of node[{key}]: expected type: "
            f"{type_name(expected)}, actual type: {actual.__qualname__}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]",
        )

    def with_parent(self, key: str) -> NodeRunError:
        err = NodeOutputTypeError([key, *self.node_path], self.expected, self.actual, chunk=self.chunk)
        err.__traceback__ = self.__traceback__
        return err


class FanInMergeError(GraphRunError):
    """Raised when several values arrive at one node in one step and cannot be merged."""


class FieldMappingError(GraphRunError, LookupError):
    """Raised when a Workflow field mapping fails at run time: a map key on the source path is missing (invoke
    mode; a streaming run skips the chunk), or a value on the way to the field is None (both modes; in a streaming
    run as an error item of the mapped stream).

    ``node_path`` lists node keys from the outermost graph down to the node whose input was being mapped,
    ``predecessor`` is the node the value came from and ``field_path`` the source path of the mapping (the
    target path for a failing custom extractor).
    """

    def __init__(self, problem: str, *, node_path: Sequence[str], predecessor: str, field_path: Sequence[str]) -> None:
        self.node_path = list(node_path)
        self.predecessor = predecessor
        self.field_path = list(field_path)
        self.problem = problem
        node = self.node_path[-1] if self.node_path else ""
        super().__init__(
            f"[FieldMappingError] field mapping from node '{predecessor}' to node '{node}', field path "
            f"[{'.'.join(self.field_path)}]: {problem}\n"
            f"------------------------\nnode path: [{', '.join(self.node_path)}]"
        )


class FieldMappingTypeError(FieldMappingError, RuntimeTypeError):
    """Raised when a Workflow field mapping whose types only may fit (from ``Any``, a ``dict[str, Any]`` value, a
    base class to a subclass, a union) carries a value that is not of the target field's type: a ``None`` or a
    ``str`` mapped into an ``int``, an ``Animal`` that is not the ``Dog`` the node takes (Eino's "runtime check
    failed for mapping ..., field[X]-[Y] is absolutely not assignable"). In a streaming run it is an error item
    of the mapped stream. ``expected`` is the field's type, ``actual`` the value's."""

    def __init__(
        self,
        problem: str,
        *,
        node_path: Sequence[str],
        predecessor: str,
        field_path: Sequence[str],
        expected: Any,
        actual: type,
    ) -> None:
        super().__init__(problem, node_path=node_path, predecessor=predecessor, field_path=field_path)
        self.expected = expected
        self.actual = actual


class StateError(GraphRunError, LookupError):
    """Raised by ``process_state`` when the run has no state, or no state of the requested type."""


class StateUpdateError(GraphRunError, ValueError):
    """``Runnable.update_state`` was given a node the graph does not have or that does not run from that step, an
    output that is not of the node's output type, or a state patch that does not fit the state type; the message
    names which."""
