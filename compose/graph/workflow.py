"""Workflow: a DAG whose edges map fields (eino-semantics 1.13, Eino's ``workflow.go``).

A ``Workflow`` records its nodes' inputs and compiles them into a ``Graph`` in ``all_predecessor`` (DAG) mode:
each (predecessor, node) pair becomes one edge whose transform turns the predecessor's output into the
``{to_path: value}`` of its mappings; the engine fan-in merges those dicts and builds the node's input from them
(``_field_mapping``). Data-only edges (``direct_dependency=False``) deliver data but do not decide whether the node
is skipped; control-only edges (``add_dependency``) and workflow branches deliver no data. There is no scheduler
of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, Unpack, get_args

from compose._types import Assignable, assignable, instance_check, type_name
from compose.errors import GraphBuildError, GraphCompiledError, InvalidGraphError, TypeMismatchError
from compose.graph._field_mapping import EdgeMap, FieldCheck, FieldMapping, InputBuild, check_conflicts, path_type
from compose.graph.branch import _Branch
from compose.graph.builder import END, START, FanInMergeConfig, Graph, NodeOptions

if TYPE_CHECKING:
    from compose.graph.info import CompileCallback
    from compose.lambdas import Lambda
    from compose.runnable import Runnable

__all__ = ["Workflow", "WorkflowNode"]

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741


@dataclass(frozen=True, slots=True)
class _Input:
    src: str
    mappings: tuple[FieldMapping, ...]
    control: bool
    data: bool


def _static_path(path: str | Sequence[str]) -> tuple[str, ...]:
    parts = (path,) if isinstance(path, str) else tuple(path)
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise GraphBuildError(f"static value path must name at least one field, got {path!r}")
    return parts


class WorkflowNode:
    """A node of a ``Workflow`` (or its END): declare where its input comes from."""

    def __init__(self, workflow: Workflow[Any, Any], key: str) -> None:
        self._workflow = workflow
        self.key = key
        self._inputs: list[_Input] = []
        self._static: dict[tuple[str, ...], Any] = {}

    def _put(self, item: _Input) -> Self:
        self._workflow._check_mutable()
        if item.src == END:
            raise GraphBuildError("END cannot be a predecessor")
        if item.src != START and item.src not in self._workflow._nodes:
            raise GraphBuildError(f"predecessor node '{item.src}' needs to be added to workflow first")
        if item.src == self.key:
            raise GraphBuildError(f"node '{self.key}' cannot depend on itself")
        for m in item.mappings:
            if not isinstance(m, FieldMapping):
                raise GraphBuildError(f"add_input takes FieldMappings (from_field, to_field, ...), got {m!r}")
        self._inputs.append(item)
        return self

    def add_input(self, from_key: str, *mappings: FieldMapping, direct_dependency: bool = True) -> Self:
        """Take data from ``from_key``: its whole output without ``mappings``, else the mapped fields. The node
        also waits for ``from_key`` (control) unless ``direct_dependency=False`` (Eino's
        ``WithNoDirectDependency``), when it must reach the node by another path."""
        return self._put(_Input(from_key, mappings or (FieldMapping(),), direct_dependency, True))

    def add_dependency(self, from_key: str) -> Self:
        """Run after ``from_key`` without taking its output (control only)."""
        return self._put(_Input(from_key, (), True, False))

    def set_static_value(self, path: str | Sequence[str], value: Any) -> Self:
        """Put the constant ``value`` at the field ``path`` of the node's input on every run."""
        self._workflow._check_mutable()
        self._static[_static_path(path)] = value
        return self

    def __repr__(self) -> str:
        return f"WorkflowNode({self.key!r}, inputs={[i.src for i in self._inputs]})"


class Workflow(Generic[I, O]):
    """A DAG of nodes whose inputs are mapped from their predecessors' fields; ``state=factory`` gives each run
    a graph-local state, as ``Graph(state=...)`` does.

    Example::

        wf = Workflow[dict[str, Any], dict[str, Any]]()
        wf.add_lambda_node("upper", str.upper).add_input(START, from_field("text"))
        wf.end().add_input("upper", to_field("upper")).add_input(START, map_fields("text", "original"))
        r = wf.compile()
        assert await r.invoke({"text": "hi"}) == {"upper": "HI", "original": "hi"}
    """

    def __init__(
        self, input_type: Any = None, output_type: Any = None, *, state: Callable[[], Any] | None = None
    ) -> None:
        # ``Workflow[I, O]()`` sets ``__orig_class__`` after ``__init__``: compile() hands I and O to the graph
        self._graph: Graph[I, O] = Graph(input_type, output_type, state=state)
        self._nodes: dict[str, WorkflowNode] = {}
        self._end = WorkflowNode(self, END)
        self._branches: list[tuple[str, _Branch[Any]]] = []

    def _check_mutable(self) -> None:
        if self._graph._compiled:
            raise GraphCompiledError()

    def _node(self, key: str) -> WorkflowNode:
        node = WorkflowNode(self, key)
        self._nodes[key] = node
        return node

    def add_lambda_node(
        self, key: str, fn: Callable[..., Any] | Lambda[Any, Any], **options: Unpack[NodeOptions]
    ) -> WorkflowNode:
        """Add a lambda node (a function or a ``Lambda``)."""
        self._graph.add_lambda_node(key, fn, **options)
        return self._node(key)

    def add_chat_model_node(self, key: str, model: Any, **options: Unpack[NodeOptions]) -> WorkflowNode:
        """Add a chat model node."""
        self._graph.add_chat_model_node(key, model, **options)
        return self._node(key)

    def add_chat_template_node(self, key: str, template: Any, **options: Unpack[NodeOptions]) -> WorkflowNode:
        """Add a chat template node."""
        self._graph.add_chat_template_node(key, template, **options)
        return self._node(key)

    def add_tools_node(self, key: str, tools_node: Any, **options: Unpack[NodeOptions]) -> WorkflowNode:
        """Add a ToolsNode."""
        self._graph.add_tools_node(key, tools_node, **options)
        return self._node(key)

    def add_graph_node(
        self,
        key: str,
        graph: Any,
        *,
        compile_options: Mapping[str, Any] | None = None,
        **options: Unpack[NodeOptions],
    ) -> WorkflowNode:
        """Add a sub-graph: a Graph, a Chain, a compiled Runnable (a Workflow: pass ``workflow.compile()``)."""
        self._graph.add_graph_node(key, graph, compile_options=compile_options, **options)
        return self._node(key)

    def add_passthrough_node(self, key: str, **options: Unpack[NodeOptions]) -> WorkflowNode:
        """Add a node that passes its (built) input on."""

        def passthrough(x: Any) -> Any:
            return x

        self._graph.add_lambda_node(key, passthrough, **options)
        return self._node(key)

    def end(self) -> WorkflowNode:
        """The END node, whose input is the workflow's output."""
        return self._end

    def add_branch(self, from_key: str, branch: _Branch[Any]) -> None:
        """Add a branch after ``from_key``; unlike a Graph branch it passes no data to the chosen node, which
        takes its input from its own ``add_input`` declarations."""
        self._check_mutable()
        if not isinstance(branch, _Branch):
            raise GraphBuildError(f"add_branch needs a GraphBranch/StreamGraphBranch (or multi), got {branch!r}")
        if from_key != START and from_key not in self._nodes:
            raise GraphBuildError(f"branch start node '{from_key}' needs to be added to workflow first")
        for e in branch.end_nodes:
            if e != END and e not in self._nodes:
                raise GraphBuildError(f"branch end node '{e}' needs to be added to workflow first")
        self._branches.append((from_key, branch))

    def compile(
        self,
        *,
        name: str | None = None,
        interrupt_before: Sequence[str] | None = None,
        interrupt_after: Sequence[str] | None = None,
        checkpoint_store: Any = None,
        fan_in_merge_config: Mapping[str, FanInMergeConfig] | None = None,
        compile_callbacks: Sequence[CompileCallback] | None = None,
        keep_history: bool | int = False,
    ) -> Runnable[I, O]:
        """Check every mapping and compile to a DAG ``Runnable``; the workflow is frozen afterwards.

        Raises ``GraphBuildError`` for a field a type does not have, a mapping into a type without fields, two
        mappings to the same (or an enclosing) field of one node, and ``InvalidGraphError`` for a node without a
        control predecessor or an END without input.
        """
        self._check_mutable()
        g = self._graph
        args = get_args(getattr(self, "__orig_class__", None))
        if g._input_type is None and args:
            g._input_type, g._output_type = args[0], g._output_type if g._output_type is not None else args[1]
        with g._transaction():
            for node in [*self._nodes.values(), self._end]:
                self._wire(node)
            for src, branch in self._branches:
                for e in branch.end_nodes:
                    if (src, e) not in g._edge_maps:
                        g._add_mapped_edge(src, e, EdgeMap(src, e, ()), control=True, edge=False)
                g.add_branch(src, branch)
            controlled = {e for s, e in g._edges if (s, e) not in g._data_only}
            controlled |= {e for _, b in self._branches for e in b.end_nodes}
            if END not in controlled:
                raise InvalidGraphError("end node not set")
            lost = sorted(k for k in self._nodes if k not in controlled)
            if lost:
                raise InvalidGraphError(
                    f"nodes {lost} have no control predecessor: give them an add_input with a direct dependency, "
                    "an add_dependency or a branch"
                )
            return g.compile(
                name=name,
                trigger_mode="all_predecessor",
                interrupt_before=interrupt_before,
                interrupt_after=interrupt_after,
                checkpoint_store=checkpoint_store,
                fan_in_merge_config=fan_in_merge_config,
                compile_callbacks=compile_callbacks,
                keep_history=keep_history,
            )

    def _wire(self, node: WorkflowNode) -> None:
        g = self._graph
        key = node.key
        in_t = g._in_type(key)
        by_src: dict[str, list[_Input]] = {}
        for item in node._inputs:
            by_src.setdefault(item.src, []).append(item)
        paths: list[tuple[str, ...]] = list(node._static)
        for src, items in by_src.items():
            out_t = g._out_type(src)
            mappings = [m for it in items if it.data for m in it.mappings]
            checks: list[FieldCheck] = []
            for m in mappings:
                to_t = path_type(in_t, m.to_path, side="successor input")
                # a custom extractor's value is not checked, at compile or run time (as in Eino)
                if m.extractor is None:
                    from_t = path_type(out_t, m.from_path, side="predecessor output")
                    fits = assignable(from_t, to_t)
                    if fits is Assignable.NO:
                        raise TypeMismatchError(
                            f"field mapping {m} from node[{src}] to node[{key}]: type[{type_name(from_t)}] "
                            f"cannot be assigned to type[{type_name(to_t)}]",
                            start=src, end=key, output_type=from_t, input_type=to_t,
                        )
                    cls = instance_check(to_t) if fits is Assignable.MAY else None
                    if cls is not None:  # only may fit (from Any, a base class, a union): checked at run time
                        checks.append(FieldCheck(m, cls, to_t))
                paths.append(m.to_path)
            control = any(it.control for it in items)
            g._add_mapped_edge(src, key, EdgeMap(src, key, mappings, checks), control=control)
        check_conflicts(key, paths)
        for p in node._static:
            path_type(in_t, p, side="successor input")
        g._input_builds[key] = InputBuild(in_t, node._static, paths)

