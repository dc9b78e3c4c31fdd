"""Chain: a graph built by appending nodes one after another (eino-semantics 1.12).

A ``Chain`` wraps a Pregel ``Graph``: each ``append_*`` adds a node (``node_<i>`` unless ``key=`` names it) with an
edge from every current tail (START at first), ``append_parallel`` adds several nodes fed by the one tail, each
wrapping its output as ``{output_key: output}`` so that the next node receives the merged dict, and
``append_branch`` adds several nodes behind a branch condition, all of which become tails. ``compile()`` adds the
edges from the tails to END and compiles the graph; there is no scheduler of its own. A chain is a valid
sub-graph: ``Graph.add_graph_node(key, chain)`` and ``Chain.append_graph(chain)``.

As every pyeino builder, a call that cannot be honoured raises at once and changes nothing (Eino's chain keeps the
first error and reports it at compile).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, Unpack, cast

from compose._types import TypedBuilder
from compose.errors import BranchError, GraphBuildError, GraphCompiledError, InvalidGraphError
from compose.graph.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch, _Branch
from compose.graph.builder import END, START, FanInMergeConfig, Graph, NodeOptions, TriggerMode
from compose.state import is_async_callable, is_awaitable

if TYPE_CHECKING:
    from compose.components.base import DocumentTransformer, Embedder, Indexer, Loader, Retriever
    from compose.graph.info import CompileCallback
    from compose.lambdas import Lambda
    from compose.runnable import Runnable

__all__ = ["Chain", "ChainBranch", "ChainNodeOptions", "Parallel"]

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


class ChainNodeOptions(NodeOptions, total=False):
    """The Graph adders' ``NodeOptions`` plus ``key``: the node's key in the chain's graph (Eino's
    ``WithNodeKey``); without it the chain names the node ``node_<i>`` (``node_<i>_parallel_<j>``,
    ``node_<i>_branch_<branch key>``)."""

    key: str


@dataclass(frozen=True, slots=True)
class _NodeSpec:
    """A node waiting to be added: ``Graph.<adder>(node_key, *args, **extra, **options)``."""

    adder: str
    args: tuple[Any, ...]
    options: NodeOptions
    key: str | None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def add_to(self, graph: Graph[Any, Any], key: str, **more: Any) -> None:
        getattr(graph, self.adder)(key, *self.args, **self.extra, **self.options, **more)


def _spec(adder: str, args: tuple[Any, ...], options: ChainNodeOptions, **extra: Any) -> _NodeSpec:
    key = options.get("key")
    if key is not None and (not isinstance(key, str) or not key):
        raise GraphBuildError(f"node key must be a non-empty string, got {key!r}")
    rest = cast(NodeOptions, {k: v for k, v in options.items() if k != "key"})
    return _NodeSpec(adder, args, rest, key, extra)


class _NodeSet:
    """What ``Parallel`` and ``ChainBranch`` share: nodes added under a key of the set (an output key, a branch
    key), each with the Graph adder's options."""

    _what = "node"

    def __init__(self) -> None:
        self._nodes: dict[str, _NodeSpec] = {}

    def _put(self, key: str, spec: _NodeSpec) -> Self:
        if not isinstance(key, str) or not key:
            raise GraphBuildError(f"{self._what} key must be a non-empty string, got {key!r}")
        if key in self._nodes:
            raise GraphBuildError(f"{type(self).__name__} add node err, duplicate {self._what} key= {key}")
        self._nodes[key] = spec
        return self

    def add_lambda(
        self, key: str, fn: Callable[..., Any] | Lambda[Any, Any], /, **options: Unpack[ChainNodeOptions]
    ) -> Self:
        """Add a lambda node (a function or a ``Lambda``)."""
        return self._put(key, _spec("add_lambda_node", (fn,), options))

    def add_chat_model(self, key: str, model: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a chat model node."""
        return self._put(key, _spec("add_chat_model_node", (model,), options))

    def add_chat_template(self, key: str, template: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a chat template node."""
        return self._put(key, _spec("add_chat_template_node", (template,), options))

    def add_tools_node(self, key: str, tools_node: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a ToolsNode."""
        return self._put(key, _spec("add_tools_node", (tools_node,), options))

    def add_graph(
        self,
        key: str,
        graph: Graph[Any, Any] | Chain[Any, Any] | Runnable[Any, Any],
        /,
        *,
        compile_options: Mapping[str, Any] | None = None,
        **options: Unpack[ChainNodeOptions],
    ) -> Self:
        """Add a sub-graph: a Graph, a Chain or a compiled Runnable."""
        return self._put(key, _spec("add_graph_node", (graph,), options, compile_options=compile_options))

    def add_passthrough(self, key: str, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a node that passes its input on."""
        return self._put(key, _spec("add_passthrough_node", (), options))

    def add_retriever(self, key: str, retriever: Retriever, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a retriever node."""
        return self._put(key, _spec("add_retriever_node", (retriever,), options))

    def add_embedding(self, key: str, embedder: Embedder, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add an embedding node."""
        return self._put(key, _spec("add_embedding_node", (embedder,), options))

    def add_indexer(self, key: str, indexer: Indexer, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add an indexer node."""
        return self._put(key, _spec("add_indexer_node", (indexer,), options))

    def add_loader(self, key: str, loader: Loader, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Add a loader node."""
        return self._put(key, _spec("add_loader_node", (loader,), options))

    def add_document_transformer(
        self, key: str, transformer: DocumentTransformer, /, **options: Unpack[ChainNodeOptions]
    ) -> Self:
        """Add a document transformer node."""
        return self._put(key, _spec("add_document_transformer_node", (transformer,), options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self._nodes)})"


class Parallel(_NodeSet):
    """Nodes that run side by side on the same input; ``add_*``'s first argument is the node's output key.

    Example::

        chain = Chain[str, dict[str, Any]]()
        chain.append_parallel(Parallel().add_lambda("upper", str.upper).add_lambda("lower", str.lower))
        assert await chain.compile().invoke("Hi") == {"upper": "HI", "lower": "hi"}
    """

    _what = "output"

    def _put(self, key: str, spec: _NodeSpec) -> Self:
        if "output_key" in spec.options:
            raise GraphBuildError(f"parallel node '{key}': the parallel sets its output_key, do not pass one")
        return super()._put(key, spec)


class ChainBranch(_NodeSet):
    """Nodes behind a branch condition; ``add_*``'s first argument is the key the condition returns.

    ``condition(value) -> key``; ``stream=True``: ``condition(reader) -> key`` (as ``StreamGraphBranch``, with
    its ``value_condition=``); ``multi=True``: the condition returns a set of keys. A condition may be async.

    Example::

        chain = Chain[str, str]()
        chain.append_branch(
            ChainBranch(lambda s: "short" if len(s) < 4 else "long")
            .add_lambda("short", str.upper)
            .add_lambda("long", str.lower)
        )
        assert await chain.compile().invoke("Hi") == "HI"
    """

    _what = "branch node"

    def __init__(
        self,
        condition: Callable[[Any], Any],
        *,
        stream: bool = False,
        multi: bool = False,
        value_condition: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__()
        self._cls: type[_Branch[Any]] = {
            (False, False): GraphBranch,
            (False, True): GraphMultiBranch,
            (True, False): StreamGraphBranch,
            (True, True): StreamGraphMultiBranch,
        }[(stream, multi)]
        # validates the conditions and reads their input type, which the wrapping below would hide
        self._probe: _Branch[Any] = self._cls(condition, ("_",), value_condition=value_condition)
        self.condition, self.value_condition, self.multi = condition, value_condition, multi

    def _graph_branch(self, key_of: Mapping[str, str], start: str) -> _Branch[Any]:
        vc = self.value_condition
        wrapped_vc = _mapped(vc, key_of, self.multi, start) if vc is not None else None
        branch = self._cls(
            _mapped(self.condition, key_of, self.multi, start), key_of.values(), value_condition=wrapped_vc
        )
        branch.input_type = self._probe.input_type
        return branch


def _mapped(cond: Callable[[Any], Any], key_of: Mapping[str, str], multi: bool, start: str) -> Callable[[Any], Any]:
    """``cond`` returning node keys for the branch keys it returns (sync if ``cond`` is: the engine calls a
    sync condition inline)."""

    def node_key(k: Any) -> Any:
        if not isinstance(k, str):
            return k  # the branch's own check reports the wrong type
        if k not in key_of:
            raise BranchError(
                f"branch invocation returns unintended end node: {k} (node '{start}', branch keys: "
                f"{sorted(key_of)})",
                node=start,
            )
        return key_of[k]

    def to_nodes(chosen: Any) -> Any:
        if not multi:
            return node_key(chosen)
        if isinstance(chosen, str) or not isinstance(chosen, Iterable):
            return chosen
        return {node_key(k) for k in chosen}

    if is_async_callable(cond):

        async def acond(x: Any) -> Any:
            return to_nodes(await cond(x))

        return acond

    async def later(chosen: Any) -> Any:
        return to_nodes(await chosen)

    def scond(x: Any) -> Any:
        chosen = cond(x)
        return later(chosen) if is_awaitable(chosen) else to_nodes(chosen)

    return scond


class Chain(TypedBuilder, Generic[I, O]):
    """A typed chain of nodes; ``compile()`` makes it a ``Runnable`` (Pregel mode).

    Example::

        chain = Chain[str, int]()
        chain.append_lambda(str.strip).append_lambda(len)
        assert await chain.compile().invoke(" hi ") == 2

    ``state=factory`` gives each run a fresh graph-local state, as ``Graph``'s.
    """

    def __init__(
        self, input_type: Any = None, output_type: Any = None, *, state: Callable[[], Any] | None = None
    ) -> None:
        self._input_type, self._output_type, self._state = input_type, output_type, state
        self._g: Graph[I, O] | None = None
        self._idx = 0
        self._tails: list[str] = []  # empty: START
        self._has_end = False

    @property
    def _graph(self) -> Graph[I, O]:
        # made on first use: ``Chain[I, O]()`` sets the type arguments after ``__init__``
        if self._g is None:
            self._g = Graph(self.input_type, self.output_type, state=self._state)
        return self._g

    @contextmanager
    def _atomic(self) -> Iterator[Graph[I, O]]:
        """A failed append leaves the chain and its graph as they were."""
        g = self._graph
        if g._compiled:
            raise GraphCompiledError("chain has been compiled, cannot be modified")
        idx, tails = self._idx, list(self._tails)
        try:
            with g._transaction():
                yield g
        except BaseException:
            self._idx, self._tails = idx, tails
            raise

    def _next_key(self) -> str:
        key = f"node_{self._idx}"
        self._idx += 1  # as Eino: a node with its own key still takes an index
        return key

    def _append(self, spec: _NodeSpec) -> Self:
        with self._atomic() as g:
            default = self._next_key()
            key = spec.key or default
            spec.add_to(g, key)
            for tail in self._tails or [START]:
                g.add_edge(tail, key)
            self._tails = [key]
        return self

    def _single_tail(self, what: str) -> str:
        if len(self._tails) > 1:
            raise GraphBuildError(
                f"append {what} invalid, multiple previous nodes: {self._tails}; "
                "append_passthrough() first to join them"
            )
        return self._tails[0] if self._tails else START

    # ------------------------------------------------------------------ nodes

    def append_lambda(
        self, fn: Callable[..., Any] | Lambda[Any, Any], /, **options: Unpack[ChainNodeOptions]
    ) -> Self:
        """Append a lambda node (a function or a ``Lambda``)."""
        return self._append(_spec("add_lambda_node", (fn,), options))

    def append_chat_model(self, model: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a chat model node: ``list[Message] -> Message``."""
        return self._append(_spec("add_chat_model_node", (model,), options))

    def append_chat_template(self, template: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a chat template node: ``dict[str, Any] -> list[Message]``."""
        return self._append(_spec("add_chat_template_node", (template,), options))

    def append_tools_node(self, tools_node: Any, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a ToolsNode: ``Message -> list[Message]``."""
        return self._append(_spec("add_tools_node", (tools_node,), options))

    def append_graph(
        self,
        graph: Graph[Any, Any] | Chain[Any, Any] | Runnable[Any, Any],
        /,
        *,
        compile_options: Mapping[str, Any] | None = None,
        **options: Unpack[ChainNodeOptions],
    ) -> Self:
        """Append a sub-graph: a Graph, a Chain (compiled with this chain, with ``compile_options``) or a
        compiled Runnable."""
        return self._append(_spec("add_graph_node", (graph,), options, compile_options=compile_options))

    def append_passthrough(self, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a node that passes its input on; joins the tails of a parallel or a branch."""
        return self._append(_spec("add_passthrough_node", (), options))

    def append_retriever(self, retriever: Retriever, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a retriever node: ``str -> list[Document]``."""
        return self._append(_spec("add_retriever_node", (retriever,), options))

    def append_embedding(self, embedder: Embedder, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append an embedding node: ``list[str] -> list[list[float]]``."""
        return self._append(_spec("add_embedding_node", (embedder,), options))

    def append_indexer(self, indexer: Indexer, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append an indexer node: ``list[Document] -> list[str]``."""
        return self._append(_spec("add_indexer_node", (indexer,), options))

    def append_loader(self, loader: Loader, /, **options: Unpack[ChainNodeOptions]) -> Self:
        """Append a loader node: ``Source -> list[Document]``."""
        return self._append(_spec("add_loader_node", (loader,), options))

    def append_document_transformer(
        self, transformer: DocumentTransformer, /, **options: Unpack[ChainNodeOptions]
    ) -> Self:
        """Append a document transformer node: ``list[Document] -> list[Document]``."""
        return self._append(_spec("add_document_transformer_node", (transformer,), options))

    # ------------------------------------------------------------------ parallel and branch

    def append_parallel(self, parallel: Parallel) -> Self:
        """Append nodes that run side by side on the tail's output; the next node receives
        ``{output_key: output}`` of all of them. Needs at least two nodes and a single tail."""
        if not isinstance(parallel, Parallel):
            raise GraphBuildError(f"append parallel invalid, need a Parallel, got {parallel!r}")
        if len(parallel._nodes) < 2:
            raise GraphBuildError(f"append parallel invalid, not enough nodes, count = {len(parallel._nodes)}")
        with self._atomic() as g:
            start = self._single_tail("parallel")
            prefix = self._next_key()
            keys = []
            for i, (output_key, spec) in enumerate(parallel._nodes.items()):
                key = spec.key or f"{prefix}_parallel_{i}"
                spec.add_to(g, key, output_key=output_key)
                g.add_edge(start, key)
                keys.append(key)
            self._tails = keys
        return self

    def append_branch(self, branch: ChainBranch) -> Self:
        """Append nodes behind a branch condition on the tail's output; every branch node becomes a tail (the
        next node follows whichever ran). Needs at least two nodes and a single tail."""
        if not isinstance(branch, ChainBranch):
            raise GraphBuildError(f"append branch invalid, need a ChainBranch, got {branch!r}")
        if len(branch._nodes) < 2:
            raise GraphBuildError(f"append branch invalid, nodeList length = {len(branch._nodes)}, need at least 2")
        with self._atomic() as g:
            start = self._single_tail("branch")
            prefix = self._next_key()
            key_of: dict[str, str] = {}
            for branch_key, spec in branch._nodes.items():
                key = spec.key or f"{prefix}_branch_{branch_key}"
                spec.add_to(g, key)
                key_of[branch_key] = key
            g.add_branch(start, branch._graph_branch(key_of, start))
            self._tails = list(key_of.values())
        return self

    # ------------------------------------------------------------------ compile

    def compile(
        self,
        *,
        name: str | None = None,
        max_run_steps: int | None = None,
        trigger_mode: TriggerMode | None = None,
        interrupt_before: Iterable[str] | None = None,
        interrupt_after: Iterable[str] | None = None,
        checkpoint_store: Any = None,
        fan_in_merge_config: Mapping[str, FanInMergeConfig] | None = None,
        compile_callbacks: Iterable[CompileCallback] | None = None,
        keep_history: bool | int = False,
    ) -> Runnable[I, O]:
        """Join the tails to END and compile the chain's graph (Pregel mode) into a ``Runnable``; the chain is
        frozen afterwards. Options as ``Graph.compile``'s; ``trigger_mode`` is refused, as in Eino.

        Raises ``InvalidGraphError`` for an empty chain, ``TypeMismatchError`` when the last node's output does
        not fit the chain's output type.
        """
        if trigger_mode is not None:
            raise GraphBuildError("chain doesn't support node trigger mode option")
        if not self._tails:
            raise InvalidGraphError(f"pre node keys not set, number of nodes in chain= {len(self._graph._nodes)}")
        options: dict[str, Any] = {
            "name": name or "chain",
            "max_run_steps": max_run_steps,
            "interrupt_before": interrupt_before,
            "interrupt_after": interrupt_after,
            "checkpoint_store": checkpoint_store,
            "fan_in_merge_config": fan_in_merge_config,
            "compile_callbacks": compile_callbacks,
            "keep_history": keep_history,
        }
        if self._has_end:  # compiled before: the graph is complete
            return self._graph.compile(**options)
        with self._atomic() as g:  # a failed compile leaves the chain open, without the END edges
            for tail in self._tails:
                g.add_edge(tail, END)
            runnable = g.compile(**options)
        self._has_end = True
        return runnable

    def __repr__(self) -> str:
        n = len(self._g._nodes) if self._g is not None else 0
        state = "compiled" if self._g is not None and self._g._compiled else "open"
        return f"Chain(nodes={n}, tails={self._tails or [START]}, {state})"
