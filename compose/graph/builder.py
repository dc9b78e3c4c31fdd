"""The graph builder: nodes, edges, branches and compile-time checks (eino-semantics 1.1-1.5, 1.11).

Every builder call checks what it can at once and raises a ``GraphBuildError`` subclass naming the nodes and types
at fault (errors are not sticky: a failed call changes nothing); passthrough types are inferred as edges are
added, so a mismatch through passthroughs fails at the edge that causes it. ``compile()`` checks the whole
structure with networkx (a loop in DAG mode, nodes START cannot reach), that every passthrough type was
inferred, adds runtime checks where types only may fit (edges, branch conditions) and on every node's output
whose declared type is concrete (one ``isinstance``: a wrong value raises ``NodeOutputTypeError`` naming the
node), and precompiles the integer-indexed tables the scheduler runs on. The graph is frozen afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypedDict, TypeVar, Unpack, runtime_checkable

from compose._engine.names import END, START, FanInMergeConfig, Handler
from compose._types import Assignable, TypedBuilder, assignable, type_name
from compose.components.document import Document, Source
from compose.errors import GraphBuildError, GraphCompiledError, TypeMismatchError
from compose.graph._type_checks import check_edge as _check_edge
from compose.graph._type_checks import handler_hints as _handler_hints
from compose.graph.branch import _Branch
from compose.graph.info import CompileCallback
from compose.lambdas import Lambda, Paradigms, _hints, derive
from compose.schema import Message

if TYPE_CHECKING:
    from compose._engine.tables import RunMapping
    from compose.components.base import DocumentTransformer, Embedder, Indexer, Loader, Retriever
    from compose.runnable import Runnable

__all__ = ["END", "START", "FanInMergeConfig", "Graph", "NodeOptions", "TriggerMode"]

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741

TriggerMode = Literal["any_predecessor", "all_predecessor"]

class NodeOptions(TypedDict, total=False):
    """Options every ``add_*_node`` takes as keyword arguments.

    ``name``: the display name (callbacks' ``RunInfo.name``); ``pre_handler(input, state) -> input`` and
    ``post_handler(output, state) -> output`` run under the graph's state lock (stream variants take and return a
    ``StreamReader``); ``input_key``: the node receives ``input[input_key]`` of a dict input; ``output_key``: the
    node's output is wrapped as ``{output_key: output}``.
    """

    name: str
    pre_handler: Handler
    post_handler: Handler
    stream_pre_handler: Handler
    stream_post_handler: Handler
    input_key: str
    output_key: str


@runtime_checkable
class _Buildable(Protocol):
    """A builder ``add_graph_node`` compiles with its parent: a ``Graph``, ``Workflow`` or ``Chain`` (which builds
    on this module, so is not imported by it)."""

    @property
    def input_type(self) -> Any: ...

    @property
    def output_type(self) -> Any: ...

    def compile(self, *, name: str | None = None) -> Any: ...


@dataclass(slots=True)
class _NodeDef:
    key: str
    component: str
    type_name: str
    impl: Any
    paradigms: Paradigms | None
    input_type: Any
    output_type: Any
    name: str | None = None
    pre_handler: Handler | None = None
    post_handler: Handler | None = None
    stream_pre_handler: Handler | None = None
    stream_post_handler: Handler | None = None
    input_key: str | None = None
    output_key: str | None = None
    compile_options: dict[str, Any] = field(default_factory=dict)

    @property
    def outer_input_type(self) -> Any:
        return dict[str, Any] if self.input_key else self.input_type

    @property
    def outer_output_type(self) -> Any:
        return dict[str, Any] if self.output_key else self.output_type


def _state_type(factory: Callable[..., Any] | None) -> Any:
    if factory is None:
        return None
    if isinstance(factory, type):
        return factory
    _, ret = _hints(factory)
    return ret


class Graph(TypedBuilder, Generic[I, O]):
    """A typed graph of nodes joined by edges and branches; ``compile()`` makes it runnable.

    Example::

        g = Graph[str, str]()
        g.add_lambda_node("upper", str.upper)
        g.add_edge(START, "upper")
        g.add_edge("upper", END)
        r = g.compile()
        assert await r.invoke("hi") == "HI"

    ``state=factory`` gives each run a fresh graph-local state (see ``process_state``).
    """

    def __init__(
        self,
        input_type: Any = None,
        output_type: Any = None,
        *,
        state: Callable[[], Any] | None = None,
    ) -> None:
        self._input_type = input_type
        self._output_type = output_type
        self.state_factory = state
        self.state_type: Any = _state_type(state)
        self._nodes: dict[str, _NodeDef] = {}
        self._edges: list[tuple[str, str]] = []
        self._branches: dict[str, list[_Branch[Any]]] = {}
        # edges (branch end nodes included) with an end whose type is not known yet: an untyped passthrough
        # not inferred yet; checked once both ends are known (Eino's toValidateMap)
        self._unresolved: list[tuple[str, str]] = []
        self._compiled = False
        # set by Workflow (eino-semantics 1.13): edges (and branch end nodes) whose values are transformed by a
        # field mapping, so not type-checked as plain edges; edges carrying data only; per-node input builders
        self._edge_maps: dict[tuple[str, str], RunMapping] = {}
        self._data_only: set[tuple[str, str]] = set()
        self._input_builds: dict[str, RunMapping] = {}

    # ------------------------------------------------------------------ types

    def _out_type(self, key: str) -> Any:
        return self.input_type if key == START else self._nodes[key].outer_output_type

    def _in_type(self, key: str) -> Any:
        return self.output_type if key == END else self._nodes[key].outer_input_type

    # ------------------------------------------------------------------ nodes

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Several builder calls as one: if the block fails, the graph is left as it was before it (nodes, edges,
        branches and the types inferred for passthrough nodes). Used by ``Chain``, whose appends add several."""
        nodes = dict(self._nodes)
        types = {k: (n.input_type, n.output_type) for k, n in nodes.items()}
        edges, unresolved = list(self._edges), list(self._unresolved)
        branches = {k: list(v) for k, v in self._branches.items()}
        maps, data_only, builds = dict(self._edge_maps), set(self._data_only), dict(self._input_builds)
        try:
            yield
        except BaseException:
            self._nodes, self._edges, self._unresolved, self._branches = nodes, edges, unresolved, branches
            self._edge_maps, self._data_only, self._input_builds = maps, data_only, builds
            for k, (in_t, out_t) in types.items():
                nodes[k].input_type, nodes[k].output_type = in_t, out_t
            raise

    def _check_mutable(self) -> None:
        if self._compiled:
            raise GraphCompiledError()

    def _add(self, key: str, node: _NodeDef, options: NodeOptions) -> None:
        self._check_mutable()
        unknown = set(options) - set(NodeOptions.__annotations__)
        if unknown:
            raise GraphBuildError(f"node '{key}': unknown option(s) {sorted(unknown)}")
        if not isinstance(key, str) or not key:
            raise GraphBuildError(f"node key must be a non-empty string, got {key!r}")
        if key in (START, END):
            raise GraphBuildError(f"node '{key}' is reserved, cannot add manually")
        if key in self._nodes:
            raise GraphBuildError(f"node '{key}' has been added yet")
        name = options.get("name")
        pre_handler, post_handler = options.get("pre_handler"), options.get("post_handler")
        stream_pre_handler, stream_post_handler = options.get("stream_pre_handler"), options.get("stream_post_handler")
        input_key, output_key = options.get("input_key"), options.get("output_key")
        if node.component == "Passthrough" and (input_key or output_key):
            # a keyed side is a dict[str, Any]; the value taken from (or wrapped into) it is of any type
            node.input_type = node.output_type = Any
        if pre_handler and stream_pre_handler:
            raise GraphBuildError(f"node '{key}': give pre_handler or stream_pre_handler, not both")
        if post_handler and stream_post_handler:
            raise GraphBuildError(f"node '{key}': give post_handler or stream_post_handler, not both")
        node.name = name
        node.input_key, node.output_key = input_key, output_key
        node.pre_handler, node.post_handler = pre_handler, post_handler
        node.stream_pre_handler, node.stream_post_handler = stream_pre_handler, stream_post_handler
        self._check_handlers(node)
        self._nodes[key] = node

    def _check_handlers(self, node: _NodeDef) -> None:
        handlers = [
            ("pre", node.pre_handler, node.outer_input_type, False, node.input_key),
            ("post", node.post_handler, node.outer_output_type, False, node.output_key),
            ("stream pre", node.stream_pre_handler, node.outer_input_type, True, node.input_key),
            ("stream post", node.stream_post_handler, node.outer_output_type, True, node.output_key),
        ]
        for label, handler, node_type, is_stream, keyed in handlers:
            if handler is None:
                continue
            if self.state_factory is None:
                raise GraphBuildError(f"node '{node.key}' needs state but graph state is not enabled")
            hints = _handler_hints(handler)
            value_t, state_t = hints
            if is_stream:
                from compose._types import stream_item_type

                value_t = stream_item_type(value_t) if value_t is not Any else Any
            if state_t is not Any and self.state_type not in (None, Any) and state_t != self.state_type:
                raise TypeMismatchError(
                    f"node[{node.key}]'s {label} handler state type[{type_name(state_t)}] is different from "
                    f"graph[{type_name(self.state_type)}]",
                    end=node.key,
                )
            if node.component == "Passthrough" and not keyed:  # a keyed side is a dict, checked as any node's
                if value_t is not Any:
                    raise TypeMismatchError(f"passthrough node[{node.key}]'s {label} handler type isn't any")
                continue
            if value_t is not Any and node_type is not Any and assignable(value_t, node_type) is Assignable.NO:
                raise TypeMismatchError(
                    f"node[{node.key}]'s {label} handler type[{type_name(value_t)}] is different from its "
                    f"{'input' if 'pre' in label else 'output'} type[{type_name(node_type)}]",
                    end=node.key,
                    input_type=node_type,
                    output_type=value_t,
                )

    def add_lambda_node(
        self,
        key: str,
        fn: Callable[..., Any] | Lambda[Any, Any],
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a node from a function (sync/async: invoke; async generator: stream) or a ``Lambda``."""
        lam = Lambda.from_function(fn)
        node = _NodeDef(key, "Lambda", lam.type_name, lam, lam.paradigms, lam.input_type, lam.output_type)
        self._add(key, node, options)

    def add_chat_model_node(
        self,
        key: str,
        model: Any,
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a chat model node: ``list[Message] -> Message`` (``generate`` to invoke, ``stream`` to stream)."""
        if not callable(getattr(model, "generate", None)) or not callable(getattr(model, "stream", None)):
            raise GraphBuildError(f"node '{key}': a chat model needs async generate() and stream() methods")
        from compose.models.base import checked_model_calls

        generate, stream = checked_model_calls(key, model)
        paradigms = dataclasses.replace(derive(invoke=generate, stream=stream), invoke1=generate)
        node = _NodeDef(key, "ChatModel", type(model).__name__, model, paradigms, list[Message], Message)
        self._add(key, node, options)

    def add_chat_template_node(
        self,
        key: str,
        template: Any,
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a chat template node: ``dict[str, Any] -> list[Message]`` (``format`` to invoke; a stream is the
        one formatted list). Callbacks see a ``PromptCallbackInput`` (the variables and the template's
        ``templates``) as input and a ``PromptCallbackOutput`` (the messages and the templates) as output, as
        Eino's prompt components report."""
        if not callable(getattr(template, "format", None)):
            raise GraphBuildError(f"node '{key}': a chat template needs an async format(variables) method")
        fmt = template.format

        async def invoke(variables: Any, **_o: Any) -> Any:
            return await fmt(variables)

        from compose.prompt._callbacks import prompt_report

        paradigms = dataclasses.replace(derive(invoke=invoke), invoke1=fmt, report=prompt_report(template))
        node = _NodeDef(
            key, "ChatTemplate", type(template).__name__, template, paradigms, dict[str, Any], list[Message]
        )
        self._add(key, node, options)

    def add_tools_node(
        self,
        key: str,
        tools_node: Any,
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a ToolsNode: ``Message -> list[Message]`` (stream chunks: ``list[Message | None]``)."""
        if not callable(getattr(tools_node, "invoke", None)) or not callable(getattr(tools_node, "stream", None)):
            raise GraphBuildError(f"node '{key}': a tools node needs async invoke() and stream() methods")
        paradigms = dataclasses.replace(
            derive(invoke=tools_node.invoke, stream=tools_node.stream), invoke1=tools_node.invoke
        )
        node = _NodeDef(key, "ToolsNode", type(tools_node).__name__, tools_node, paradigms, Message, list[Message])
        self._add(key, node, options)

    # retrieval components (eino-semantics 1.1): invoke only, the rest derived; node_options are keyword options

    def add_retriever_node(self, key: str, retriever: Retriever, **options: Unpack[NodeOptions]) -> None:
        """Add a retriever node: ``str -> list[Document]`` (``retrieve``)."""
        self._add_component(key, "Retriever", retriever, "retrieve", str, list[Document], options)

    def add_embedding_node(self, key: str, embedder: Embedder, **options: Unpack[NodeOptions]) -> None:
        """Add an embedding node: ``list[str] -> list[list[float]]`` (``embed_strings``)."""
        self._add_component(key, "Embedding", embedder, "embed_strings", list[str], list[list[float]], options)

    def add_indexer_node(self, key: str, indexer: Indexer, **options: Unpack[NodeOptions]) -> None:
        """Add an indexer node: ``list[Document] -> list[str]`` (``store``, returning the ids)."""
        self._add_component(key, "Indexer", indexer, "store", list[Document], list[str], options)

    def add_loader_node(self, key: str, loader: Loader, **options: Unpack[NodeOptions]) -> None:
        """Add a loader node: ``Source -> list[Document]`` (``load``)."""
        self._add_component(key, "Loader", loader, "load", Source, list[Document], options)

    def add_document_transformer_node(
        self, key: str, transformer: DocumentTransformer, **options: Unpack[NodeOptions]
    ) -> None:
        """Add a document transformer node: ``list[Document] -> list[Document]`` (``transform``)."""
        docs = list[Document]
        self._add_component(key, "DocumentTransformer", transformer, "transform", docs, docs, options)

    def _add_component(
        self, key: str, component: str, impl: Any, method: str, in_t: Any, out_t: Any, options: NodeOptions
    ) -> None:
        fn = getattr(impl, method, None)
        if not callable(fn):
            raise GraphBuildError(f"node '{key}': a {component} node needs an async {method}() method")
        paradigms = dataclasses.replace(derive(invoke=fn), invoke1=fn)
        self._add(key, _NodeDef(key, component, type(impl).__name__, impl, paradigms, in_t, out_t), options)

    def add_graph_node(
        self,
        key: str,
        graph: Graph[Any, Any] | Any,
        *,
        compile_options: Mapping[str, Any] | None = None,
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a sub-graph or a Chain (compiled with the parent, with ``compile_options``) or an already compiled
        Runnable."""
        from compose.runnable import Runnable

        if isinstance(graph, (_Buildable, Runnable)):
            in_t, out_t = graph.input_type, graph.output_type
        else:
            raise GraphBuildError(f"node '{key}': add_graph_node needs a Graph or a compiled Runnable")
        node = _NodeDef(key, "Graph", "Graph", graph, None, in_t, out_t, compile_options=dict(compile_options or {}))
        self._add(key, node, options)

    def add_passthrough_node(
        self,
        key: str,
        **options: Unpack[NodeOptions],
    ) -> None:
        """Add a node that passes its input on unchanged; its type is inferred from its neighbours as edges are
        added. With ``input_key`` it takes a ``dict[str, Any]`` and passes on ``input[input_key]``; with
        ``output_key`` it emits ``{output_key: input}`` (its handlers then take the dict)."""

        async def identity(x: Any, **_o: Any) -> Any:
            return x

        async def identity_stream(r: Any, **_o: Any) -> Any:
            return r

        paradigms = derive(invoke=identity, transform=identity_stream)
        node = _NodeDef(key, "Passthrough", "Passthrough", None, paradigms, None, None)
        self._add(key, node, options)

    # ------------------------------------------------------------------ edges and branches

    def add_edge(self, start: str, end: str) -> None:
        """Add a data + control edge ``start -> end``; types are checked now."""
        self._check_mutable()
        if start == END:
            raise GraphBuildError("END cannot be a start node")
        if end == START:
            raise GraphBuildError("START cannot be an end node")
        if start != START and start not in self._nodes:
            raise GraphBuildError(f"edge start node '{start}' needs to be added to graph first")
        if end != END and end not in self._nodes:
            raise GraphBuildError(f"edge end node '{end}' needs to be added to graph first")
        if (start, end) in self._edges:
            raise GraphBuildError(f"control edge[{start}]-[{end}] have been added yet")
        inferred, unresolved = self._infer([(start, end)])
        self._edges.append((start, end))
        self._commit(inferred, unresolved)

    def _add_mapped_edge(
        self, start: str, end: str, mapping: RunMapping, *, control: bool, edge: bool = True
    ) -> None:
        """A Workflow edge: ``mapping`` turns each value (stream) sent along it into ``end``'s gathered input, so the
        plain edge type check does not apply; ``control=False``: data only; ``edge=False``: only the mapping of
        a branch's end node. Checked by the Workflow."""
        self._check_mutable()
        self._edge_maps[(start, end)] = mapping
        if not control:
            self._data_only.add((start, end))
        if edge:
            self._edges.append((start, end))

    def _infer(
        self, new: Iterable[tuple[str, str]], seed: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Check the types of ``new`` edges and of those waiting for a passthrough's type, inferring
        passthrough types along them until nothing changes (Eino's ``updateToValidateMap``): an untyped
        passthrough takes its predecessor's output type or its successor's input type, whichever edge tells
        first. Returns the inferred types and the edges still waiting, for ``_commit``; changes nothing, so
        that a ``TypeMismatchError`` (raised at the call whose edge makes the types clash) leaves the graph as
        it was."""
        inferred = dict(seed or {})

        def out_of(k: str) -> Any:
            if k == START:
                return self.input_type
            return inferred[k] if k in inferred else self._nodes[k].outer_output_type

        def in_of(k: str) -> Any:
            if k == END:
                return self.output_type
            return inferred[k] if k in inferred else self._nodes[k].outer_input_type

        pending = [*self._unresolved, *new]
        while True:
            left = []
            for s, e in pending:
                out_t, in_t = out_of(s), in_of(e)
                if out_t is None and in_t is None:
                    left.append((s, e))
                elif in_t is None:
                    inferred[e] = out_t
                elif out_t is None:
                    inferred[s] = in_t
                else:
                    _check_edge(s, e, out_t, in_t)
            if len(left) == len(pending):
                return inferred, left
            pending = left

    def _commit(self, inferred: Mapping[str, Any], unresolved: list[tuple[str, str]]) -> None:
        for k, tp in inferred.items():
            node = self._nodes[k]
            node.input_type = node.output_type = tp
        self._unresolved = unresolved

    def add_branch(self, start: str, branch: _Branch[Any]) -> None:
        """Add a branch after ``start``; every end node must exist (or be END)."""
        self._check_mutable()
        if not isinstance(branch, _Branch):
            raise GraphBuildError(f"add_branch needs a GraphBranch/StreamGraphBranch (or multi), got {branch!r}")
        if start == END:
            raise GraphBuildError("END cannot be a start node")
        if start != START and start not in self._nodes:
            raise GraphBuildError(f"branch start node '{start}' needs to be added to graph first")
        for end in sorted(branch.end_nodes):
            if end == START:
                raise GraphBuildError("START cannot be an end node")
            if end != END and end not in self._nodes:
                raise GraphBuildError(f"branch end node '{end}' needs to be added to graph first")
        out_t = self._out_type(start)
        cond_t = branch.input_type
        seed: dict[str, Any] = {}
        if out_t is None and cond_t is not Any:  # an untyped passthrough takes the condition's type (as Eino)
            seed[start] = out_t = cond_t
        if out_t is not None and cond_t is not Any and assignable(out_t, cond_t) is Assignable.NO:
            raise TypeMismatchError(
                f"condition's input type[{type_name(cond_t)}] and start node[{start}]'s output "
                f"type[{type_name(out_t)}] are mismatched",
                start=start, output_type=out_t, input_type=cond_t,
            )
        inferred, unresolved = self._infer(
            [(start, end) for end in sorted(branch.end_nodes) if (start, end) not in self._edge_maps], seed
        )
        self._branches.setdefault(start, []).append(branch)
        self._commit(inferred, unresolved)

    # ------------------------------------------------------------------ compile

    def compile(
        self,
        *,
        name: str | None = None,
        max_run_steps: int | None = None,
        trigger_mode: TriggerMode = "any_predecessor",
        interrupt_before: Iterable[str] | None = None,
        interrupt_after: Iterable[str] | None = None,
        checkpoint_store: Any = None,
        fan_in_merge_config: Mapping[str, FanInMergeConfig] | None = None,
        compile_callbacks: Iterable[CompileCallback] | None = None,
        keep_history: bool | int = False,
    ) -> Runnable[I, O]:
        """Check the whole graph and return a ``Runnable``; the graph is frozen afterwards.

        ``keep_history``: keep the snapshots of every run given a ``checkpoint_id`` in ``checkpoint_store``, one
        per step, after the run ends (``True``; ``N``: the last N per id): ``Runnable.get_state_history``,
        replay with ``from_step=``, ``update_state``.

        ``compile_callbacks``: each is called once, when compilation has finished, with the graph's ``GraphInfo``
        (a callable, or an object with ``on_finish(info)``); a sub-graph's go in its node's ``compile_options``.

        Raises ``InvalidGraphError`` for a loop in ``all_predecessor`` (DAG) mode, a node START cannot reach, no
        edge from START or to END, and ``GraphBuildError`` for bad options.
        """
        from compose.graph._compiler import compile_graph

        return compile_graph(
            self,
            name=name,
            max_run_steps=max_run_steps,
            trigger_mode=trigger_mode,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            checkpoint_store=checkpoint_store,
            fan_in_merge_config=fan_in_merge_config,
            compile_callbacks=compile_callbacks,
            keep_history=keep_history,
        )

    def _successors(self, key: str) -> list[str]:
        succ = [e for s, e in self._edges if s == key]
        for b in self._branches.get(key, []):
            succ.extend(e for e in b.end_nodes if e not in succ)
        return succ

    def __repr__(self) -> str:
        state = "compiled" if self._compiled else "building"
        return (
            f"Graph({type_name(self.input_type)} -> {type_name(self.output_type)}, nodes={list(self._nodes)}, "
            f"edges={len(self._edges)}, branches={sum(map(len, self._branches.values()))}, {state})"
        )
