"""Seeing the graph: ``GraphInfo``, its Mermaid drawing, and compile callbacks (Eino's ``introspect.go``).

``Runnable.graph_info()`` describes a compiled graph: its nodes (key, kind, display name, types, keys), its edges
and branches, and, for a node that is a sub-graph, the sub-graph's own ``GraphInfo``. It is built from the
compiled tables on the first call and cached, so a run never pays for it. ``compile(compile_callbacks=[cb])``
hands the top-level graph's info to each callback once compilation finishes (Eino's ``GraphCompileCallback``);
a sub-graph's callbacks go in its own ``compile_options``, as Eino's ``WithGraphCompileOptions``.

Example::

    g = Graph[str, str]()
    g.add_lambda_node("upper", str.upper)
    g.add_edge(START, "upper")
    g.add_edge("upper", END)
    info = g.compile(compile_callbacks=[lambda info: print(info.name)]).graph_info()
    assert [n.kind for n in info.nodes] == ["Lambda"]
    print(info.to_mermaid())
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, cast, runtime_checkable

from compose._types import type_name
from compose.errors import GraphBuildError
from compose.graph._field_mapping import EdgeMap

if TYPE_CHECKING:
    from compose._engine.tables import Tables
    from compose.graph.branch import _Branch

__all__ = ["BranchInfo", "CompileCallback", "GraphCompileCallback", "GraphInfo", "NodeInfo"]

_START, _END = "start", "end"  # compose.graph's START and END (not imported: compose.graph.builder imports this module)


class _TypeNames:
    """``input_type_name`` and ``output_type_name`` of a record with ``input_type`` and ``output_type``."""

    __slots__ = ()
    input_type: Any
    output_type: Any

    @property
    def input_type_name(self) -> str:
        """``input_type`` as printed in error messages (``list[Message]``)."""
        return type_name(self.input_type)

    @property
    def output_type_name(self) -> str:
        """``output_type`` as printed in error messages."""
        return type_name(self.output_type)


@dataclass(frozen=True, slots=True)
class NodeInfo(_TypeNames):
    """One node of a compiled graph.

    ``kind``: the component (``"ChatModel"``, ``"ToolsNode"``, ``"Lambda"``, ``"Graph"``, ``"Passthrough"``, ...);
    ``name``: the display name (the ``name=`` option, else the key); ``type_name``: the implementation's name (the
    model's class, the lambda's function); ``input_type``/``output_type``: what the node's edges carry (a
    ``dict[str, Any]`` on a side with ``input_key``/``output_key``; a passthrough's inferred type); ``instance``:
    the object added (the model, the ToolsNode, the ``Lambda``, the sub-graph; None for a passthrough);
    ``graph``: a sub-graph node's own ``GraphInfo``.
    """

    key: str
    kind: str
    name: str
    type_name: str
    input_type: Any
    output_type: Any
    input_key: str | None = None
    output_key: str | None = None
    instance: Any = field(default=None, compare=False, repr=False)
    graph: GraphInfo | None = None


@dataclass(frozen=True, slots=True)
class BranchInfo:
    """A branch after ``start`` choosing among ``end_nodes`` (in node order, END last); ``index``: its place
    among ``start``'s branches; ``streaming``: the condition reads the node's output stream; ``multi``: it may
    choose several end nodes; ``input_type``: what the condition takes."""

    start: str
    end_nodes: tuple[str, ...]
    index: int = 0
    streaming: bool = False
    multi: bool = False
    input_type: Any = Any


@dataclass(frozen=True, slots=True)
class GraphInfo(_TypeNames):
    """What a compiled graph is made of (Eino's ``GraphInfo``).

    ``nodes`` in the order they were added; ``edges``: ``(start, end)`` pairs that carry data and control,
    grouped by start node (START first, then the nodes in order); ``data_edges`` and ``control_edges``: edges
    carrying only data or only control (a Workflow's ``add_input(..., direct_dependency=False)`` and
    ``add_dependency``; empty for a Graph); ``branches`` grouped by start node, in registration order. Eino's
    ``GraphInfo`` lists the control edges (``Edges``) and the data edges (``DataEdges``), an edge carrying both
    in both lists; here the three lists partition the edges, so ``edges + control_edges`` are Eino's ``Edges``
    and ``edges + data_edges`` its ``DataEdges``.
    """

    name: str
    nodes: tuple[NodeInfo, ...]
    edges: tuple[tuple[str, str], ...]
    branches: tuple[BranchInfo, ...]
    input_type: Any
    output_type: Any
    trigger_mode: Literal["any_predecessor", "all_predecessor"] = "any_predecessor"
    state_type: Any = None
    data_edges: tuple[tuple[str, str], ...] = ()
    control_edges: tuple[tuple[str, str], ...] = ()

    def node(self, key: str) -> NodeInfo:
        """The node ``key``; ``KeyError`` if there is none."""
        for n in self.nodes:
            if n.key == key:
                return n
        raise KeyError(key)

    @property
    def sub_graphs(self) -> dict[str, GraphInfo]:
        """Node key -> the sub-graph's ``GraphInfo``, for every node that is a sub-graph."""
        return {n.key: n.graph for n in self.nodes if n.graph is not None}

    def to_mermaid(self) -> str:
        """A Mermaid flowchart of the graph, to paste into a ```` ```mermaid ```` block of a Markdown file.

        START and END are round nodes, every node is labelled with its key and kind, edges are arrows (a
        data-only edge labelled ``data``, a control-only edge a thick arrow labelled ``control``), branches
        dashed arrows labelled ``branch``, sub-graphs ``subgraph`` blocks holding their own nodes. Node ids are
        generated (``n0``, ``n2_n1`` inside sub-graph ``n2``), so any key renders; labels are escaped.
        """
        lines = ["flowchart TD"]
        _mermaid_body(self, "", lines, "    ")
        return "\n".join(lines) + "\n"


@runtime_checkable
class GraphCompileCallback(Protocol):
    """Told when a graph's compilation finishes (Eino's ``GraphCompileCallback``)."""

    def on_finish(self, info: GraphInfo) -> None:
        """Called once per ``compile()`` with the compiled graph's info."""


CompileCallback: TypeAlias = GraphCompileCallback | Callable[[GraphInfo], None]
"""What ``compile(compile_callbacks=...)`` takes: an object with ``on_finish(info)`` or a plain callable."""


def check_compile_callbacks(callbacks: Iterable[Any]) -> list[Callable[[GraphInfo], None]]:
    """The functions to call for ``callbacks``; ``GraphBuildError`` naming one that is neither kind."""
    calls: list[Callable[[GraphInfo], None]] = []
    for cb in callbacks:
        on_finish = getattr(cb, "on_finish", None)
        if callable(on_finish):
            calls.append(on_finish)
        elif callable(cb):
            calls.append(cb)
        else:
            raise GraphBuildError(
                f"a compile callback must be callable or have an on_finish(info) method, got {type(cb).__qualname__}"
            )
    return calls


def build_graph_info(tables: Tables) -> GraphInfo:
    """The ``GraphInfo`` of a compiled graph, read from its tables (sub-graphs' from theirs, cached there)."""
    keys = tables.keys
    nodes = tuple(
        NodeInfo(
            key=nd.key,
            kind=nd.info.component,
            name=nd.info.name,
            type_name=nd.info.type,
            input_type=nd.inbox_type,
            output_type=nd.output_type,
            input_key=nd.input_key,
            output_key=nd.output_key,
            instance=nd.instance,
            graph=nd.sub.graph_info() if nd.sub is not None else None,
        )
        for nd in tables.nodes
    )
    all_edges = [(s, e) for s, succ in _sources(tables) for e in succ]
    kinds = [_edge_kind(tables, s, e) for s, e in all_edges]
    edges = tuple((keys[s], keys[e]) for (s, e), k in zip(all_edges, kinds, strict=True) if k == "both")
    data_edges = tuple((keys[s], keys[e]) for (s, e), k in zip(all_edges, kinds, strict=True) if k == "data")
    control_edges = tuple((keys[s], keys[e]) for (s, e), k in zip(all_edges, kinds, strict=True) if k == "control")
    branches = tuple(
        BranchInfo(
            start=keys[s],
            end_nodes=tuple(keys[e] for e in b.ends),
            index=b.idx,
            streaming=cast("_Branch[Any]", b.branch)._stream,
            multi=cast("_Branch[Any]", b.branch)._multi,
            input_type=b.branch.input_type,
        )
        for s in _source_order(tables)
        for b in tables.branches[s]
    )
    return GraphInfo(
        name=tables.name,
        nodes=nodes,
        edges=edges,
        branches=branches,
        input_type=tables.input_type,
        output_type=tables.output_type,
        trigger_mode="all_predecessor" if tables.dag else "any_predecessor",
        state_type=tables.state_type,
        data_edges=data_edges,
        control_edges=control_edges,
    )


def _edge_kind(tables: Tables, s: int, e: int) -> Literal["both", "data", "control"]:
    """What edge ``s -> e`` carries: a Workflow's data-only edge (``direct_dependency=False``) no control, its
    control-only edge (``add_dependency``: a mapping of nothing) no data; a Graph's edges carry both."""
    if (s, e) in tables.data_edges:
        return "data"
    mapping = tables.edge_maps.get((s, e)) if tables.edge_maps else None
    if isinstance(mapping, EdgeMap) and not mapping.mappings:
        return "control"
    return "both"


def _source_order(tables: Tables) -> list[int]:
    # START first, then the nodes in insertion order (END has no successors)
    return [tables.start, *range(tables.n)]


def _sources(tables: Tables) -> list[tuple[int, tuple[int, ...]]]:
    return [(s, tables.succ[s]) for s in _source_order(tables)]


# ---------------------------------------------------------------------- Mermaid

# characters that break a quoted Mermaid label or are read as markup, written as Mermaid's ``#<code>;`` entities
_ESCAPED = frozenset('"#&<>`|[](){}\\')


def _label(text: str) -> str:
    return "".join(f"#{ord(c)};" if c in _ESCAPED or not c.isprintable() else c for c in text)


def _node_label(key: str, kind: str) -> str:
    return f'"{_label(key)}<br/>{_label(kind)}"'


def _mermaid_body(info: GraphInfo, prefix: str, lines: list[str], indent: str) -> None:
    ids = {_START: f"{prefix}START", _END: f"{prefix}END"}
    ids.update({n.key: f"{prefix}n{i}" for i, n in enumerate(info.nodes)})
    lines.append(f'{indent}{ids[_START]}(["start"])')
    for n in info.nodes:
        nid = ids[n.key]
        if n.graph is None:
            lines.append(f"{indent}{nid}[{_node_label(n.key, n.kind)}]")
            continue
        lines.append(f"{indent}subgraph {nid} [{_node_label(n.key, n.kind)}]")
        _mermaid_body(n.graph, f"{nid}_", lines, indent + "    ")
        lines.append(f"{indent}end")
    lines.append(f'{indent}{ids[_END]}(["end"])')
    for s, e in info.edges:
        lines.append(f"{indent}{ids[s]} --> {ids[e]}")
    for s, e in info.data_edges:
        lines.append(f"{indent}{ids[s]} -->|data| {ids[e]}")
    for s, e in info.control_edges:
        lines.append(f"{indent}{ids[s]} ==>|control| {ids[e]}")
    counts: dict[str, int] = {}
    for b in info.branches:
        counts[b.start] = counts.get(b.start, 0) + 1
    for b in info.branches:
        label = "branch" if counts[b.start] == 1 else f"branch {b.index}"
        for e in b.end_nodes:
            lines.append(f"{indent}{ids[b.start]} -.->|{label}| {ids[e]}")
