"""Check a ``Graph`` and compile it into the engine's ``Tables`` (the only place that walks the builder's
structures), wrapped as a ``Runnable``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from compose._engine.fuse import fuse
from compose._engine.names import END, START, FanInMergeConfig
from compose._engine.routing import choose
from compose._engine.tables import BranchRT, Chooser, EdgeCheck, NodeRT, Tables
from compose._types import ClassInfo, instance_check
from compose.callbacks import RunInfo
from compose.checkpoint._snapshot import fingerprint
from compose.errors import GraphBuildError, InvalidGraphError
from compose.graph._type_checks import Built, runtime_branch_checks, runtime_edge_checks
from compose.graph.branch import GraphBranch, StreamGraphBranch
from compose.graph.info import CompileCallback, check_compile_callbacks
from compose.models.base import model_identity
from compose.state import is_async_callable

if TYPE_CHECKING:
    from compose.runnable import Runnable


def compile_graph(
    graph: Built,
    *,
    name: str | None,
    max_run_steps: int | None,
    trigger_mode: str,
    interrupt_before: Iterable[str] | None,
    interrupt_after: Iterable[str] | None,
    checkpoint_store: Any,
    fan_in_merge_config: Mapping[str, FanInMergeConfig] | None,
    compile_callbacks: Iterable[CompileCallback] | None,
    keep_history: bool | int = False,
) -> Runnable[Any, Any]:
    """``Graph.compile``: check the whole graph, build its tables, freeze it, report to the compile callbacks."""
    from compose.runnable import Runnable

    if trigger_mode not in ("any_predecessor", "all_predecessor"):
        raise GraphBuildError(f"unknown trigger mode {trigger_mode!r}")
    dag = trigger_mode == "all_predecessor"
    if dag and max_run_steps is not None:
        raise GraphBuildError("cannot set max run steps in dag mode")
    if max_run_steps is not None and max_run_steps < 1:
        raise GraphBuildError("max run steps limit must be at least 1")
    before, after = list(interrupt_before or ()), list(interrupt_after or ())
    on_finish = check_compile_callbacks(compile_callbacks or ())
    for key in before + after:
        if key not in graph._nodes:
            raise GraphBuildError(f"interrupt node '{key}' needs to be added to graph first")
    if checkpoint_store is not None:
        from compose.checkpoint import check_store

        check_store(checkpoint_store, where="compile(checkpoint_store=...)")
    history = _keep_history(keep_history, checkpoint_store)
    starts = [e for s, e in graph._edges if s == START] + [
        e for b in graph._branches.get(START, []) for e in b.end_nodes
    ]
    if not starts:
        raise InvalidGraphError("start node not set")
    ends = [s for s, e in graph._edges if e == END] + [
        s for s, bs in graph._branches.items() for b in bs if END in b.end_nodes
    ]
    if not ends:
        raise InvalidGraphError("end node not set")
    for key in fan_in_merge_config or {}:
        if key != END and key not in graph._nodes:
            raise GraphBuildError(f"fan-in merge config names unknown node '{key}'")

    _check_structure(graph, dag=dag)
    types = _node_types(graph)
    edge_checks = runtime_edge_checks(graph, types)
    branch_checks = runtime_branch_checks(graph, types)
    tables = build_tables(
        graph,
        name=name or "graph",
        dag=dag,
        max_run_steps=max_run_steps,
        types=types,
        edge_checks=edge_checks,
        branch_checks=branch_checks,
        fan_in=dict(fan_in_merge_config or {}),
        interrupt_before=before,
        interrupt_after=after,
        checkpoint_store=checkpoint_store,
        keep_history=history,
    )
    _check_nesting(tables)
    graph._compiled = True
    runnable: Runnable[Any, Any] = Runnable(tables)
    if on_finish:
        info = runnable.graph_info()
        for call in on_finish:
            call(info)
    return runnable


def max_nesting() -> int:
    """How deep sub-graphs may nest: a run takes about eight Python frames per level of nesting, so this is a
    thirty-second of the recursion limit (31 levels by default), leaving most of the stack to the caller (an agent, a
    tool, a server). ``sys.setrecursionlimit`` raises it."""
    return sys.getrecursionlimit() // 32


def _nesting(tables: Tables) -> int:
    return 1 + max((_nesting(nd.sub._tables) for nd in tables.nodes if nd.sub is not None), default=0)


def _check_nesting(tables: Tables) -> None:
    """Refuse, at compile, sub-graphs nested deeper than a run can go (it would fail with RecursionError)."""
    depth, most = _nesting(tables), max_nesting()
    if depth > most:
        raise GraphBuildError(
            f"graph '{tables.name}' is {depth} graphs deep (sub-graphs in sub-graphs), more than the {most} a run "
            "can take (each level costs stack frames; the limit is sys.getrecursionlimit() // 32): flatten the "
            "inner graphs into fewer levels"
        )


def _keep_history(keep: bool | int, store: Any) -> bool | int | None:
    """``compile(keep_history=)`` checked: None (off), True (all) or a positive count."""
    if keep is False or keep is None:
        return None
    if store is None:
        raise GraphBuildError("keep_history needs a checkpoint_store: the history is kept in it")
    if keep is True:
        return True
    if not isinstance(keep, int) or keep < 1:
        raise GraphBuildError(f"keep_history must be True, False or a count >= 1, got {keep!r}")
    lacking = [m + "()" for m in ("list", "delete") if not callable(getattr(store, m, None))]
    if lacking:
        raise GraphBuildError(
            f"keep_history={keep} trims each history to its last {keep} snapshots: the checkpoint store "
            f"{type(store).__qualname__} needs {' and '.join(lacking)} for that"
        )
    return keep


def _check_structure(graph: Built, *, dag: bool) -> None:
    """Every node is reachable from START, and a DAG has no loop (the loop is printed ``a -> b -> a``)."""
    # imported here, not at the top: compile is its only user, and importing it costs a cold start 0.1 s
    import networkx as nx

    digraph = nx.DiGraph()
    digraph.add_nodes_from([START, END, *graph._nodes])
    digraph.add_edges_from(graph._edges)
    for start, branches in graph._branches.items():
        for b in branches:
            digraph.add_edges_from((start, e) for e in b.end_nodes)
    reachable = nx.descendants(digraph, START) | {START}
    unreachable = sorted(k for k in graph._nodes if k not in reachable)
    if unreachable:
        raise InvalidGraphError(
            f"nodes {unreachable} cannot be reached from START and would never run; add an edge or remove them"
        )
    # END is reachable here: some node (or START) has an edge or branch to END, and every node is reachable
    if dag:
        try:
            cycle = nx.find_cycle(digraph, source=START)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            loop = " -> ".join([cycle[0][0], *[v for _, v in cycle]])
            raise InvalidGraphError(f"DAG is invalid, has loop: {loop}")

def _node_types(graph: Built) -> dict[str, tuple[Any, Any]]:
    """Every node's (input, output) type; passthrough types were inferred as edges were added (``_infer``),
    so one still unknown has no typed neighbour to take it from."""
    types: dict[str, tuple[Any, Any]] = {
        k: (n.outer_input_type, n.outer_output_type) for k, n in graph._nodes.items()
    }
    pending = sorted(k for k, (in_t, out_t) in types.items() if in_t is None or out_t is None)
    if pending:
        raise InvalidGraphError(f"some node's input or output types cannot be inferred: {pending}")
    return types


def build_tables(
    graph: Built,
    *,
    name: str,
    dag: bool,
    max_run_steps: int | None,
    types: dict[str, tuple[Any, Any]],
    edge_checks: dict[tuple[str, str], Callable[[Any], bool]],
    branch_checks: dict[tuple[str, int], Callable[[Any], bool]] | None = None,
    fan_in: dict[str, FanInMergeConfig],
    interrupt_before: Iterable[str] = (),
    interrupt_after: Iterable[str] = (),
    checkpoint_store: Any = None,
    keep_history: bool | int | None = None,
) -> Tables:
    from compose.runnable import Runnable

    defs = graph._nodes
    keys = list(defs)
    n = len(keys)
    index = {k: i for i, k in enumerate(keys)}
    index[END] = n
    index[START] = n + 1

    nodes: list[NodeRT] = []
    for i, k in enumerate(keys):
        d = defs[k]
        sub: Runnable[Any, Any] | None = None
        if d.component == "Graph":
            impl = d.impl
            sub = impl if isinstance(impl, Runnable) else impl.compile(name=d.name or k, **d.compile_options)
        in_t, out_t = types[k]
        plain = not (
            d.pre_handler or d.post_handler or d.stream_pre_handler or d.stream_post_handler or d.input_key
            or d.output_key
        )
        info = RunInfo(d.name or k, d.type_name, d.component, *_model_identity(d))
        checked_chunks = d.component == "ChatModel" and getattr(d.impl, "checks_messages", False) is True
        out_check = output_check(d)
        nodes.append(
            NodeRT(
                key=k,
                index=i,
                info=info,
                paradigms=d.paradigms,
                sub=sub,
                pre=d.pre_handler,
                post=d.post_handler,
                stream_pre=d.stream_pre_handler,
                stream_post=d.stream_post_handler,
                input_key=d.input_key,
                output_key=d.output_key,
                input_type=d.input_type if d.input_type is not None else in_t,
                inbox_type=in_t,
                output_type=out_t,
                out_check=out_check,
                declared=d.output_type,
                plain=plain,
                has_pre=bool(d.pre_handler or d.stream_pre_handler or d.input_key),
                takes_options=d.component in _TAKES_OPTIONS
                or (d.component == "Lambda" and d.impl.takes_options),
                invoke1=d.paradigms.invoke1 if plain and sub is None and d.paradigms is not None else None,
                instance=d.impl,
                blamed=sub is None and d.component != "Passthrough",
                stream_model=info.type if d.component == "ChatModel" and not checked_chunks else "",
                value_stream=sub is None
                and d.paradigms is not None
                and "stream" in d.paradigms.implemented
                and "transform" not in d.paradigms.implemented,
                value_call=out_check is not None and d.paradigms is not None and d.paradigms.implemented == {"invoke"},
                value_pre=d.pre_handler is not None and d.input_key is None,
            )
        )

    sources = [*keys, END, START]
    succ: list[tuple[int, ...]] = []
    branches: list[tuple[BranchRT, ...]] = []
    for s in sources:
        succ.append(tuple(index[e] for a, e in graph._edges if a == s))
        brs: list[BranchRT] = []
        for b_idx, branch in enumerate(graph._branches.get(s, [])):
            ends = sorted(branch.end_nodes, key=lambda e: index[e])
            check = (branch_checks or {}).get((s, b_idx))
            brs.append(BranchRT(branch, tuple(index[e] for e in ends), {e: index[e] for e in ends}, b_idx, check))
        branches.append(tuple(brs))

    preds: list[set[int]] = [set() for _ in range(n + 1)]
    all_succ: list[tuple[int, ...]] = []
    for si in range(n + 2):
        targets = list(succ[si])
        for b in branches[si]:
            targets.extend(e for e in b.ends if e not in targets)
        all_succ.append(tuple(targets))
        for e in targets:
            preds[e].add(si)

    out_types = tuple([types[k][1] for k in keys] + [graph.output_type, graph.input_type])
    # a node declaring no input type takes the one its predecessors agree on (for its zero value)
    for i, node in enumerate(nodes):
        if node.input_type is Any and not node.input_key:
            seen = {out_types[p] for p in preds[i]} - {Any}
            if len(seen) == 1:
                nodes[i] = dataclasses.replace(node, input_type=seen.pop())
    checks = {
        (index[a], index[b]): EdgeCheck(fn, a, b, graph.output_type if b == END else types[b][0])
        for (a, b), fn in edge_checks.items()
    }
    interrupt_after_idx = frozenset(index[k] for k in interrupt_after)
    direct = []
    for si in range(n + 2):
        node_rt = nodes[si] if si < n else None
        trivial = (
            not dag
            and len(succ[si]) == 1
            and not branches[si]
            and (node_rt is None or (node_rt.post is None and node_rt.stream_post is None))
            and (si, succ[si][0]) not in checks
        )
        direct.append(succ[si][0] if trivial else -1)
    ones = [bs[0] if len(bs) == 1 and not succ[si] and not dag else None for si, bs in enumerate(branches[:n])]
    value_route = [_value_route(one, si, checks, keys[si]) for si, one in enumerate(ones)]
    # a value branch chooses alike in a streaming run (its condition sees the stream concatenated)
    stream_route = [value_route[si] if one and type(one.branch) is GraphBranch else None for si, one in enumerate(ones)]
    return fuse(Tables(
        name=name,
        keys=(*keys, END, START),
        nodes=tuple(nodes),
        succ=tuple(succ),
        branches=tuple(branches),
        preds=tuple(frozenset(p) for p in preds),
        out_types=out_types,
        checks=checks,
        dag=dag,
        max_steps=None if dag else (max_run_steps if max_run_steps is not None else n + 10),
        state_factory=graph.state_factory,
        fan_in={index[k]: cfg for k, cfg in fan_in.items()},
        input_type=graph.input_type,
        output_type=graph.output_type,
        all_succ=tuple(all_succ),
        state_type=graph.state_type if graph.state_factory is not None else None,
        interrupt_before=frozenset(index[k] for k in interrupt_before),
        interrupt_after=interrupt_after_idx,
        checkpoint_store=checkpoint_store,
        keep_history=keep_history,
        fingerprint=fingerprint(
            tuple(keys),
            list(graph._edges) + [(s, e) for s, bs in graph._branches.items() for b in bs for e in sorted(b.end_nodes)],
            [types[k] for k in keys],
            name,
            state_type=graph.state_type if graph.state_factory is not None else None,
            subs=[f"{nd.key}={nd.sub._tables.fingerprint}" for nd in nodes if nd.sub is not None],
        ),
        direct=tuple(direct),
        alone=tuple((j,) for j in range(len(keys))),
        value_route=tuple(value_route),
        stream_route=tuple(stream_route),
        edge_maps={(index[a], index[b]): fn for (a, b), fn in graph._edge_maps.items()},
        builds={index[k]: fn for k, fn in graph._input_builds.items()},
        data_only=frozenset(
            (index[a], index[b])
            for a, b in graph._data_only
            if not any(b in br.end_nodes for br in graph._branches.get(a, []))
        ),
        data_edges=frozenset((index[a], index[b]) for a, b in graph._data_only),
    ))


_TAKES_OPTIONS = frozenset(
    ("ChatModel", "ToolsNode", "Graph", "Retriever", "Embedding", "Indexer", "Loader", "DocumentTransformer")
)


def output_check(d: Any) -> ClassInfo | None:
    """What node ``d``'s own output must be an instance of (each chunk, in a streaming run), or None where it is
    not checked: a declared type that no ``isinstance`` tells exactly (``instance_check``); a passthrough (its
    output is its input, checked on the way in where its inferred type only may fit); a sub-graph (its own
    nodes and edges to END check what it returns); a chat model (``checked_model_calls`` checks it already)."""
    if d.component in ("Passthrough", "Graph", "ChatModel"):
        return None
    return instance_check(d.output_type)


def _value_route(
    one: BranchRT | None, si: int, checks: Mapping[tuple[int, int], EdgeCheck], key: str
) -> Chooser | None:
    """``Tables.value_route`` of node ``si``, whose only branch (if it has no other successor) is ``one``."""
    if one is None or one.check is not None or any((si, e) in checks for e in one.ends):
        return None
    b = one.branch
    if type(b) is GraphBranch and not b._is_async:
        return partial(choose, b.condition, one, key)
    if type(b) is StreamGraphBranch and b.value_condition is not None and not is_async_callable(b.value_condition):
        return partial(choose, b.value_condition, one, key)
    return None


def _model_identity(d: Any) -> tuple[str, str]:
    """A chat-model node's request model and provider, for its ``RunInfo`` (empty for other nodes)."""
    return model_identity(d.impl) if d.component == "ChatModel" else ("", "")
