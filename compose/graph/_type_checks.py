"""The type checks of a graph under construction and at compile (eino-semantics 1.1-1.2): an edge whose types
cannot fit is a ``TypeMismatchError`` naming it; one that only *may* fit (``Any`` into ``int``) gets a runtime
checker, for edges and for branch conditions alike."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from compose._engine.names import END, START, Handler
from compose._types import Assignable, assignable, runtime_checker, type_name
from compose.errors import TypeMismatchError

if TYPE_CHECKING:
    from compose._engine.tables import RunMapping
    from compose.graph.branch import _Branch


Types = dict[str, tuple[Any, Any]]  # node key -> (input type, output type), passthroughs inferred


class Built(Protocol):
    """What the checks and compile read of a ``Graph`` (``compose.graph.builder``, which imports them)."""

    _nodes: dict[str, Any]
    _edges: list[tuple[str, str]]
    _branches: dict[str, list[_Branch[Any]]]
    _edge_maps: dict[tuple[str, str], RunMapping]
    _input_builds: dict[str, RunMapping]
    _data_only: set[tuple[str, str]]
    _compiled: bool
    state_factory: Callable[[], Any] | None
    state_type: Any

    @property
    def input_type(self) -> Any: ...

    @property
    def output_type(self) -> Any: ...

    def _successors(self, key: str) -> list[str]: ...


def runtime_edge_checks(g: Built, types: Types) -> dict[tuple[str, str], Callable[[Any], bool]]:
    """Check every edge with inferred types; edges that only *may* fit get a runtime checker."""
    checks: dict[tuple[str, str], Callable[[Any], bool]] = {}
    for s in [START, *g._nodes]:
        out_t = g.input_type if s == START else types[s][1]
        for e in g._successors(s):
            if (s, e) in g._edge_maps:
                continue
            in_t = g.output_type if e == END else types[e][0]
            if check_edge(s, e, out_t, in_t) is Assignable.MAY:
                checks[(s, e)] = runtime_checker(in_t)
    return checks


def runtime_branch_checks(g: Built, types: Types) -> dict[tuple[str, int], Callable[[Any], bool]]:
    """Check every branch condition's input type against its node's (inferred) output type; a condition
    that only *may* fit (the node returns ``Any``, the condition takes ``int``) gets a runtime checker, as
    Eino inserts a converter before the condition (keyed by node and the branch's registration index)."""
    checks: dict[tuple[str, int], Callable[[Any], bool]] = {}
    for s, branches in g._branches.items():
        out_t = g.input_type if s == START else types[s][1]
        for idx, branch in enumerate(branches):
            cond_t = branch.input_type
            verdict = assignable(out_t, cond_t)
            if verdict is Assignable.NO:
                raise TypeMismatchError(
                    f"condition's input type[{type_name(cond_t)}] and start node[{s}]'s output "
                    f"type[{type_name(out_t)}] are mismatched",
                    start=s, output_type=out_t, input_type=cond_t,
                )
            if verdict is Assignable.MAY:
                checks[(s, idx)] = runtime_checker(cond_t)
    return checks


def check_edge(start: str, end: str, out_t: Any, in_t: Any) -> Assignable:
    """``assignable(out_t, in_t)``; raises ``TypeMismatchError`` naming the edge and both types for NO."""
    verdict = assignable(out_t, in_t)
    if verdict is Assignable.NO:
        raise TypeMismatchError(
            f"graph edge[{start}]-[{end}]: start node's output type[{type_name(out_t)}] and end node's "
            f"input type[{type_name(in_t)}] mismatch",
            start=start, end=end, output_type=out_t, input_type=in_t,
        )
    return verdict


def handler_hints(handler: Handler) -> tuple[Any, Any]:
    """(value type, state type) of a handler ``(value, state) -> value``; Any where not annotated."""
    import typing

    target: Any = handler
    if not inspect.isfunction(handler) and not inspect.ismethod(handler):
        target = getattr(handler, "__call__", handler)  # noqa: B004
    try:
        hints = typing.get_type_hints(target)
        params = list(inspect.signature(target).parameters.values())
    except Exception:  # unresolvable annotations: no static check
        return Any, Any
    value_t = hints.get(params[0].name, Any) if params else Any
    state_t = hints.get(params[1].name, Any) if len(params) > 1 else Any
    return value_t, state_t
