"""The precompiled, integer-indexed tables a compiled graph runs on, and the pure routing functions over them.

Indices: nodes are ``0..n-1`` in insertion order, ``END == n``, ``START == n + 1``. Nothing here is async and
nothing here does graph analysis: compile time (``compose.graph._compiler``) fills the tables once, the run
functions read them every step. What the builder made (a branch, a sub-graph, a field mapping) is held as the
protocol the engine calls on it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from compose._engine.names import CALLING, END, NOTHING, START, FanInMergeConfig, Handler
from compose._types import ClassInfo
from compose.callbacks import RunInfo
from compose.lambdas import Paradigms

if TYPE_CHECKING:
    from compose.stream import StreamReader

__all__ = [
    "CALLING",
    "END",
    "NOTHING",
    "START",
    "Branch",
    "BranchRT",
    "Chooser",
    "EdgeCheck",
    "NodeRT",
    "RunMapping",
    "SubGraph",
    "Tables",
    "branch_targets",
]

NodePath = tuple[str, ...]
Chooser = Callable[[Any], "int | Awaitable[int]"]  # a branch choice bound to its node (``routing.choose``)


class Branch(Protocol):
    """What the engine calls on a branch (``compose.graph.branch``): it decides, the engine routes."""

    input_type: Any
    condition: Callable[[Any], Any]

    def failed(self, exc: Exception, node: str) -> Exception: ...

    async def settle(self, chosen: Any, node: str) -> str: ...

    async def decide_value(self, value: Any, node: str) -> frozenset[str]: ...

    async def decide_stream(self, reader: StreamReader[Any], node: str) -> frozenset[str]: ...


class SubGraph(Protocol):
    """A node that is itself a compiled graph (a ``Runnable``, which the engine never imports): its tables, and
    a run of it nested in the parent's run."""

    _tables: Tables

    async def _execute(self, x: Any, **kwargs: Any) -> Any: ...

    def graph_info(self) -> Any: ...


class RunMapping(Protocol):
    """What the engine calls on a Workflow edge (``EdgeMap``) or node input (``InputBuild``): ``invoke`` on a
    value, ``stream`` on a stream (lazily); ``path`` is the running graph's node path, for errors."""

    def invoke(self, value: Any, path: NodePath) -> Any: ...

    def stream(self, reader: StreamReader[Any], path: NodePath) -> StreamReader[Any]: ...


@dataclass(frozen=True, slots=True)
class NodeRT:
    """What the scheduler needs to run one node."""

    key: str
    index: int
    info: RunInfo
    paradigms: Paradigms | None  # None for a sub-graph
    sub: SubGraph | None
    pre: Handler | None
    post: Handler | None
    stream_pre: Handler | None
    stream_post: Handler | None
    input_key: str | None
    output_key: str | None
    input_type: Any  # the component's own input type (for zero values)
    inbox_type: Any  # the type of what arrives in the node's inbox (a dict with input_key)
    output_type: Any  # the type the node emits (after output_key)
    # what the node's own output (before output_key), or each chunk of its output stream, must be an instance
    # of, and the declared type that says so; None where nothing is checked (``compose.graph._compiler``)
    out_check: ClassInfo | None
    declared: Any

    plain: bool  # no handler and no key mapping
    has_pre: bool  # a pre handler or an input key: something runs before the node
    takes_options: bool  # accepts per-call node options (keyword arguments)
    # the node's own single-argument invoke when it is plain and not a sub-graph: the invoke-mode fast path
    invoke1: Callable[[Any], Any] | None
    instance: Any = None  # what was added (the model, the Lambda, the sub-graph), for ``graph_info()`` only
    # implements stream (value in) and not transform: in a streaming run, a value pre handler's output goes
    # straight to stream (what the derived transform would concatenate it back to; callbacks wrap stream)
    value_stream: bool = False
    # its output stream is checked and blamed on it (``blame.OutputStream``); not a sub-graph's or a
    # passthrough's, whose errors are named upstream
    blamed: bool = True
    # a chat model whose chunks the run checks are Messages: its model type (else ""; also for a model whose
    # stream checks its chunks itself, ``checks_messages``, as an agent's event layer: only its errors are named)
    stream_model: str = ""
    # in a streaming run: called with a value, returning one (a checked node that implements invoke only gets the
    # value its transform would concatenate, and what it returns becomes one chunk after the check)
    value_call: bool = False
    value_pre: bool = False  # its pre handler takes and returns values (no input key)


@dataclass(frozen=True, slots=True)
class EdgeCheck:
    check: Callable[[Any], bool]
    start: str
    end: str
    expected: Any


@dataclass(frozen=True, slots=True)
class BranchRT:
    branch: Branch
    ends: tuple[int, ...]
    index_of: dict[str, int]
    idx: int = 0  # registration order among the node's branches (for messages, as Eino's ``branch[n]-[idx]``)
    # a runtime check of the condition's input when the node's output type only may fit it, else None
    check: Callable[[Any], bool] | None = None


@dataclass(frozen=True, slots=True)
class Tables:
    """A compiled graph: everything the scheduler reads, as tuples indexed by node number."""

    name: str
    keys: tuple[str, ...]  # len n + 2: node keys, then "end", "start"
    nodes: tuple[NodeRT, ...]  # len n
    succ: tuple[tuple[int, ...], ...]  # len n + 2: direct edge successors
    branches: tuple[tuple[BranchRT, ...], ...]  # len n + 2
    preds: tuple[frozenset[int], ...]  # len n + 1: every predecessor (edges and branches), for DAG readiness
    out_types: tuple[Any, ...]  # len n + 2: declared output type (START: the graph input type)
    checks: dict[tuple[int, int], EdgeCheck]
    dag: bool
    max_steps: int | None
    state_factory: Callable[[], Any] | None
    fan_in: dict[int, FanInMergeConfig]
    input_type: Any
    output_type: Any
    # for a DAG: every node a skip of node i must reach (edge successors and branch end nodes)
    all_succ: tuple[tuple[int, ...], ...] = field(default=())
    state_type: Any = None
    interrupt_before: frozenset[int] = frozenset()
    interrupt_after: frozenset[int] = frozenset()
    checkpoint_store: Any = None
    # compile(keep_history=): None (off), True (every snapshot) or N (the last N per checkpoint id)
    keep_history: bool | int | None = None
    fingerprint: str = ""
    # per source (len n + 2): the one successor its output goes to when routing is trivial (a single plain edge,
    # no branch, no post handler, no runtime check), else -1: the Pregel hot path delivers these directly
    direct: tuple[int, ...] = ()
    # per node (len n + 2): ``(j,)``, a step's ``last`` nodes when node j ran alone (shared: no list per step)
    alone: tuple[tuple[int], ...] = ()
    # per node (len n, Pregel only; filled by ``fuse.fuse``): the callable a fused invoke run awaits for it, the
    # same for a streaming run (nodes that implement invoke only), and the output check the fused loop makes
    # after the call (None: unchecked, or checked inside the call, as a node with an output key is)
    fused: tuple[Callable[[Any], Any] | None, ...] = ()
    fused_stream: tuple[Callable[[Any], Any] | None, ...] = ()
    fused_check: tuple[ClassInfo | None, ...] = ()
    # per node (Pregel only): a node whose one branch (and nothing else) chooses with a synchronous condition on
    # a whole value, as that choice (``routing.choose``): an invoke run's routing and the fused loop call it;
    # stream_route: the same where the choice holds in a streaming run too (a value branch's condition, which
    # sees a stream's concatenation)
    value_route: tuple[Chooser | None, ...] = ()
    stream_route: tuple[Chooser | None, ...] = ()
    # Workflow field mapping (eino-semantics 1.13): a transform per (source, successor) applied, when the node's
    # input is taken, to the value (stream) that came along that edge or branch; a build per node applied to the
    # merged result;
    # the edges that carry data only (data_edges), and those of them no branch of their source controls either
    # (data_only: they do not count when deciding whether a node is skipped)
    edge_maps: dict[tuple[int, int], RunMapping] = field(default_factory=dict)
    builds: dict[int, RunMapping] = field(default_factory=dict)
    data_only: frozenset[tuple[int, int]] = frozenset()
    data_edges: frozenset[tuple[int, int]] = frozenset()

    n: int = field(init=False)
    end: int = field(init=False)  # == n
    start: int = field(init=False)  # == n + 1
    address: str = field(init=False)  # a root run's address (``compose.interrupt``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", f"runnable:{self.name}")
        object.__setattr__(self, "n", len(self.nodes))
        object.__setattr__(self, "end", len(self.nodes))
        object.__setattr__(self, "start", len(self.nodes) + 1)


def branch_targets(tables: Tables, src: int, chosen: list[frozenset[str]]) -> tuple[list[int], list[int]]:
    """(successors to deliver to, end nodes to mark skipped) after ``src``'s branches chose ``chosen``.

    Direct edge successors are never delivered twice; an end node chosen by no branch of ``src`` is skipped
    (meaningful in DAG mode only).
    """
    direct = tables.succ[src]
    brs = tables.branches[src]
    if len(brs) == 1 and len(chosen[0]) == 1 and not tables.dag:  # the common case: one branch choosing one node
        idx = brs[0].index_of[next(iter(chosen[0]))]
        return [] if idx in direct else [idx], []
    ctrl = direct  # a data-only edge (a Workflow's) does not keep a branch end node from being skipped
    if tables.data_edges:
        ctrl = tuple(d for d in direct if (src, d) not in tables.data_edges)
    deliver: list[int] = []
    picked: set[int] = set()
    for b, keys in zip(brs, chosen, strict=True):
        for key in sorted(keys, key=lambda k: b.index_of[k]):
            idx = b.index_of[key]
            if idx not in picked:
                picked.add(idx)
                if idx not in direct:
                    deliver.append(idx)
    skipped = sorted({e for b in brs for e in b.ends if e not in picked and e not in ctrl})
    return deliver, skipped
