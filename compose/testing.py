"""Property-based testing of graphs: random graph specs, a reference interpreter, and leak checks.

A *graph spec* (:class:`GraphSpec`) is plain data: lambda nodes that append a tag to their input, edges,
branches that choose their successors deterministically from the value, sub-graphs, both trigger modes.
:func:`build` turns a spec into a real :class:`~compose.graph.Graph`; :func:`reference_run` interprets the same
spec directly, with plain loops and no concurrency or streams, as an oracle for differential tests (it follows
eino-semantics 1.2-1.4; read :func:`reference_trace` against it). :func:`graphs` is a hypothesis strategy of
specs that compile. Hypothesis is imported only when a strategy is asked for.

The value rules, shared by the built graph and the reference:

* every value is a dict (the graph input ``{"in": "xy"}``; each node's output goes under its ``output_key``,
  by default its own key); :func:`flat` reads a value as text: a string itself, a dict the concatenation of its
  values in key order (so fan-in merges are compared independently of their order);
* a lambda node outputs ``flat(input)[-WINDOW:] + tag`` (a stream node emits the same text in several pieces);
  a node with ``fails_on`` raises ``ValueError`` when that character is in its text;
* a branch chooses from ``flat(value)`` by its ``rule``: ``"hash"`` (crc32), ``"first"`` (the first character:
  a stream branch reads only the first chunk) or ``"length"`` (``targets[1]`` once the text is at least
  ``threshold`` long, else ``targets[0]``: the bounded loops of Pregel mode).

Example, a differential test of the engine (the package's own suite is ``tests/property``)::

    from hypothesis import given
    from compose.testing import build, graph_inputs, graphs, reference_trace, same_outcome

    @given(spec=graphs(), x=graph_inputs())
    async def test_engine_against_the_reference(spec, x):
        expected = reference_trace(spec, x)
        runnable = build(spec).compile(**spec.compile_options())
        try:
            result, error = await runnable.invoke(x), None
        except Exception as exc:
            result, error = None, exc
        assert same_outcome(error, expected), spec.to_python()
        assert result == expected.output, spec.to_python()

``assert_no_leaks()`` and ``ScriptedChatModel`` serve users' tests of their own graphs and agents;
``chat_scripts()`` generates scripted model runs for agent properties.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from compose.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch
from compose.errors import FanInMergeError, GraphRunError, MaxStepsExceededError, ModelServerError, NodeRunError
from compose.graph import END, START, Graph
from compose.models.scripted import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, assistant_message
from compose.stream import StreamReader, concat

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "WINDOW",
    "BranchSpec",
    "ChatScript",
    "GraphSpec",
    "NodeSpec",
    "ScriptedChatModel",
    "Trace",
    "assert_no_leaks",
    "branch",
    "build",
    "chat_scripts",
    "flat",
    "graph_inputs",
    "graphs",
    "node_fn",
    "node_text",
    "reference_run",
    "reference_trace",
    "same_outcome",
]

Mode = Literal["any_predecessor", "all_predecessor"]
Rule = Literal["hash", "first", "length"]
Observer = Callable[[str], None]
RULES: tuple[Rule, ...] = ("hash", "first")
MODES: tuple[Mode, ...] = ("any_predecessor", "all_predecessor")

WINDOW = 24
"""A node keeps the last ``WINDOW`` characters of its input text, so values stay small in long loops."""


# ---------------------------------------------------------------------------------------------------------------
# Specs


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node: a lambda appending ``tag`` (``chunks`` > 1: a stream lambda emitting that many pieces), or a
    sub-graph (``sub``). ``fails_on``: the lambda raises ``ValueError`` when this character is in its text."""

    key: str
    tag: str = "a"
    chunks: int = 1
    sub: GraphSpec | None = None
    output_key: str = ""
    fails_on: str = ""

    @property
    def out_key(self) -> str:
        return self.output_key or self.key


@dataclass(frozen=True, slots=True)
class BranchSpec:
    """A branch after ``source``: ``stream`` picks StreamGraphBranch, ``multi`` the multi variant; ``targets``
    are its end nodes (in rule order: for ``"length"``, (continue, exit))."""

    source: str
    targets: tuple[str, ...]
    rule: Rule = "hash"
    stream: bool = False
    multi: bool = False
    threshold: int = 0

    def choose(self, text: str) -> frozenset[str]:
        """The successors this branch picks for a value whose text is ``text``."""
        n = len(self.targets)
        if self.rule == "length":
            return frozenset((self.targets[1] if len(text) >= self.threshold else self.targets[0],))
        code = ord(text[0]) if self.rule == "first" and text else zlib.crc32(text.encode())
        if self.multi:
            return frozenset(t for i, t in enumerate(self.targets) if (code >> i) & 1)
        return frozenset((self.targets[code % n],))


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """A whole graph. Validity (what :func:`graphs` guarantees): every node is reachable from START and reaches
    END; ``all_predecessor`` specs are acyclic; a branch's targets are not plain edge targets of its source."""

    mode: Mode
    nodes: tuple[NodeSpec, ...]
    edges: tuple[tuple[str, str], ...]
    branches: tuple[BranchSpec, ...] = ()
    max_run_steps: int | None = None

    def node(self, key: str) -> NodeSpec:
        return next(n for n in self.nodes if n.key == key)

    def compile_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Graph.compile``."""
        opts: dict[str, Any] = {"trigger_mode": self.mode}
        if self.max_run_steps is not None:
            opts["max_run_steps"] = self.max_run_steps
        return opts

    def step_limit(self) -> int:
        """The Pregel step limit: ``max_run_steps``, by default the number of nodes + 10."""
        return self.max_run_steps if self.max_run_steps is not None else len(self.nodes) + 10

    def all_keys(self) -> list[str]:
        """Node keys, sub-graphs' included."""
        keys: list[str] = []
        for n in self.nodes:
            keys.append(n.key)
            if n.sub is not None:
                keys.extend(n.sub.all_keys())
        return keys

    def to_python(self, var: str = "g", *, compile: bool = True) -> str:
        """Readable Python that builds this graph (used in shrunk-failure reports); it runs after
        ``from compose import *`` and ``from compose.testing import *``."""
        lines: list[str] = []
        for n in self.nodes:
            if n.sub is not None:
                lines.append(n.sub.to_python(f"{var}_{n.key}", compile=False))
        lines.append(f"{var} = Graph()")
        for n in self.nodes:
            out = f", output_key={n.out_key!r}"
            if n.sub is not None:
                opts = n.sub.compile_options()
                lines.append(f"{var}.add_graph_node({n.key!r}, {var}_{n.key}, compile_options={opts!r}{out})")
            else:
                args = [repr(n.key), f"tag={n.tag!r}"]
                args += [f"chunks={n.chunks}"] * (n.chunks > 1) + [f"fails_on={n.fails_on!r}"] * bool(n.fails_on)
                lines.append(f"{var}.add_lambda_node({n.key!r}, node_fn(NodeSpec({', '.join(args)})){out})")
        for s, e in self.edges:
            lines.append(f"{var}.add_edge({_name(s)}, {_name(e)})")
        for b in self.branches:
            targets = ", ".join(_name(t) for t in b.targets) + ("," if len(b.targets) == 1 else "")
            args = [_name(b.source), f"({targets})", repr(b.rule)]
            args += ["stream=True"] * b.stream + ["multi=True"] * b.multi
            args += [f"threshold={b.threshold}"] * (b.rule == "length")
            lines.append(f"{var}.add_branch({_name(b.source)}, branch(BranchSpec({', '.join(args)})))")
        if compile:
            call_opts = ", ".join(f"{k}={v!r}" for k, v in self.compile_options().items())
            lines.append(f"{var}_runnable = {var}.compile({call_opts})")
        return "\n".join(lines)


def _name(key: str) -> str:
    return "START" if key == START else "END" if key == END else repr(key)


# ---------------------------------------------------------------------------------------------------------------
# Value rules (shared by the built graph and the reference)


def flat(value: Any) -> str:
    """A value read as text: a string itself, a dict its values' texts in key order."""
    if isinstance(value, dict):
        return "".join(flat(value[k]) for k in sorted(value))
    return str(value)


def node_text(node: NodeSpec, value: Any) -> str:
    """What a lambda node outputs for ``value`` (before its output key wraps it)."""
    text = flat(value)
    if node.fails_on and node.fails_on in text:
        raise ValueError(f"node {node.key} fails on {node.fails_on!r}")
    return text[-WINDOW:] + node.tag


def _pieces(text: str, chunks: int) -> list[str]:
    """``text`` split into at most ``chunks`` non-empty pieces."""
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------------------------------------------------------
# Building a real graph


def build(spec: GraphSpec, *, observer: Observer | None = None) -> Graph[Any, Any]:
    """A ``compose.Graph`` for ``spec``; compile it with ``spec.compile_options()``. ``observer(key)`` is called
    each time a lambda node starts (sub-graph nodes included)."""
    g: Graph[Any, Any] = Graph()
    for n in spec.nodes:
        if n.sub is not None:
            g.add_graph_node(
                n.key, build(n.sub, observer=observer), compile_options=n.sub.compile_options(), output_key=n.out_key
            )
        else:
            g.add_lambda_node(n.key, node_fn(n, observer), output_key=n.out_key)
    for s, e in spec.edges:
        g.add_edge(s, e)
    for b in spec.branches:
        g.add_branch(b.source, branch(b))
    return g


def node_fn(node: NodeSpec, observer: Observer | None = None) -> Callable[..., Any]:
    """The function of a lambda node: async (``chunks`` == 1) or an async generator (a stream lambda)."""
    if node.chunks <= 1:

        async def invoke(value: Any) -> str:
            if observer is not None:
                observer(node.key)
            return node_text(node, value)

        return invoke

    async def stream(value: Any) -> AsyncIterator[str]:
        if observer is not None:
            observer(node.key)
        for piece in _pieces(node_text(node, value), node.chunks):
            yield piece

    return stream


def branch(b: BranchSpec) -> Any:
    """The ``GraphBranch`` (or stream/multi variant) for ``b``."""

    def pick(text: str) -> Any:
        chosen = b.choose(text)
        return set(chosen) if b.multi else next(iter(chosen))

    if not b.stream:
        return (GraphMultiBranch if b.multi else GraphBranch)(lambda v: pick(flat(v)), b.targets)

    async def on_stream(reader: StreamReader[Any]) -> Any:
        if b.rule == "first":  # decides on a prefix: the first chunk starts with the text's first character
            return pick(flat(await reader.recv()))
        return pick(flat(await concat(reader)))

    return (StreamGraphMultiBranch if b.multi else StreamGraphBranch)(on_stream, b.targets)


# ---------------------------------------------------------------------------------------------------------------
# The reference interpreter (eino-semantics 1.2-1.4): no concurrency, no streams


@dataclass
class Trace:
    """What the reference saw: the output, or the errors the engine may raise (several when nodes that run
    concurrently fail: any one may surface first); the supersteps the top graph ran (Pregel); the lambda nodes
    run (in order, sub-graphs' included); the nodes skipped (DAG; in sub-graphs that run at most once)."""

    output: Any = None
    errors: list[GraphRunError] = field(default_factory=list)
    steps: int = 0
    executed: list[str] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)

    @property
    def error(self) -> GraphRunError | None:
        """The first possible error (None: the run succeeds)."""
        return self.errors[0] if self.errors else None


class _Failed(Exception):
    """Nodes that the engine runs concurrently failed: ``errors`` are the ones that may surface."""

    def __init__(self, errors: list[GraphRunError]) -> None:
        super().__init__(errors)
        self.errors = errors


def reference_run(spec: GraphSpec, value: Any, *, max_run_steps: int | None = None) -> Any:
    """The output the engine must give for ``spec`` on ``value``, or raise (one of) the error(s) it may raise."""
    trace = reference_trace(spec, value, max_run_steps=max_run_steps)
    if trace.error is not None:
        raise trace.error
    return trace.output


def reference_trace(spec: GraphSpec, value: Any, *, max_run_steps: int | None = None) -> Trace:
    """Interpret ``spec`` on ``value`` and record what happened (see :class:`Trace`)."""
    trace = Trace()
    try:
        trace.output = _run_graph(spec, value, max_run_steps, trace, top=True, once=True)
    except _Failed as failed:
        trace.errors = failed.errors
    except GraphRunError as exc:
        trace.errors = [exc]
    return trace


def _run_graph(spec: GraphSpec, value: Any, max_run_steps: int | None, trace: Trace, *, top: bool, once: bool) -> Any:
    """``once``: this graph runs at most once in the top graph's run (its skips are recorded)."""
    if spec.mode == "all_predecessor":
        return _run_dag(spec, value, trace, once=once)
    limit = max_run_steps if max_run_steps is not None else spec.step_limit()
    return _run_pregel(spec, value, limit, trace, top=top)


def _run_node(node: NodeSpec, value: Any, trace: Trace, *, once: bool = False) -> dict[str, Any]:
    """A node's output; raises ``_Failed`` with the errors it may fail with."""
    if node.sub is not None:
        try:
            out = _run_graph(node.sub, value, node.sub.max_run_steps, trace, top=False, once=once)
        except (_Failed, GraphRunError) as exc:  # a node path grows as the error leaves the sub-graph
            errors = exc.errors if isinstance(exc, _Failed) else [exc]
            raise _Failed([e.with_parent(node.key) if isinstance(e, NodeRunError) else e for e in errors]) from None
        return {node.out_key: out}
    trace.executed.append(node.key)
    try:
        return {node.out_key: node_text(node, value)}
    except ValueError as exc:
        raise _Failed([NodeRunError([node.key], exc)]) from None


def _route(spec: GraphSpec, source: str, value: Any) -> tuple[list[str], set[str]]:
    """Where ``source``'s output goes (its edges, and what its branches choose) and which branch end nodes it
    skips (those no branch of ``source`` chose)."""
    sent = [e for s, e in spec.edges if s == source]
    ends: set[str] = set()
    chosen: set[str] = set()
    for b in spec.branches:
        if b.source == source:
            ends |= set(b.targets)
            chosen |= b.choose(flat(value))
    return sent + sorted(chosen - set(sent)), ends - chosen


def _merge(node: str, values: list[Any]) -> Any:
    """Fan-in (1.4): one value as is; several dicts key-wise, a duplicate key is an error."""
    if len(values) == 1:
        return values[0]
    merged: dict[str, Any] = {}
    for v in values:
        for k, item in v.items():
            if k in merged:
                raise FanInMergeError(f"(values merge map) duplicated key ('{k}') found (node '{node}')")
            merged[k] = item
    return merged


def _run_pregel(spec: GraphSpec, value: Any, limit: int, trace: Trace, *, top: bool) -> Any:
    """Supersteps: every node with a value runs; END wins as soon as it has a value."""
    inbox: dict[str, list[Any]] = {}  # node -> the values it received in the last step
    for target in _route(spec, START, value)[0]:
        inbox.setdefault(target, []).append(value)
    step = 0  # START is not a step
    while True:
        # Eino reads (merges) every ready channel before it looks at END (getFromReadyChannels)
        inputs = {k: _merge(k, vs) for k, vs in sorted(inbox.items())}
        if END in inputs:
            return inputs[END]
        if not inputs:
            raise GraphRunError("no tasks to execute")
        if step >= limit:
            raise MaxStepsExceededError(limit)
        inbox = {}
        outputs: dict[str, Any] = {}
        failures: list[GraphRunError] = []
        for key, v in inputs.items():  # the step's nodes run concurrently: any failure may surface first
            try:
                outputs[key] = _run_node(spec.node(key), v, trace)
            except _Failed as failed:
                failures += failed.errors
        if failures:
            raise _Failed(failures)
        for key, out in outputs.items():
            for target in _route(spec, key, out)[0]:
                inbox.setdefault(target, []).append(out)
        step += 1
        if top:
            trace.steps = step


def _run_dag(spec: GraphSpec, value: Any, trace: Trace, *, once: bool) -> Any:
    """All-predecessor mode: a node runs once every predecessor has delivered or been skipped, with at least
    one value; a node all of whose predecessors were skipped is skipped too (no step limit). Nodes run eagerly
    and concurrently, so after a failure the others go on: every failure they reach may surface first."""
    preds: dict[str, set[str]] = {k: set() for k in [*(n.key for n in spec.nodes), END]}
    for s, e in spec.edges:
        preds[e].add(s)
    for b in spec.branches:
        for t in b.targets:
            preds[t].add(b.source)
    got: dict[str, dict[str, Any]] = {k: {} for k in preds}  # node -> predecessor -> value
    skipped_by: dict[str, set[str]] = {k: set() for k in preds}
    resolved: set[str] = set()  # run, failed or skipped
    failures: list[GraphRunError] = []

    def deliver(source: str, out: Any) -> None:
        sent, skipped = _route(spec, source, out)
        for t in sent:
            got[t][source] = out
        for t in skipped:
            skipped_by[t].add(source)

    def successors(key: str) -> list[str]:
        return [e for s, e in spec.edges if s == key] + [t for b in spec.branches if b.source == key for t in b.targets]

    deliver(START, value)
    while True:
        skip = [k for k in preds if k not in resolved and preds[k] <= skipped_by[k]]
        if skip:  # a skipped node skips its successors: repeated until nothing changes
            resolved.add(skip[0])
            if once:
                trace.skipped.add(skip[0])
            for t in successors(skip[0]):
                skipped_by[t].add(skip[0])
            continue
        ready = [k for k in preds if k not in resolved and got[k] and preds[k] <= set(got[k]) | skipped_by[k]]
        if END in ready and not failures:
            return _merge(END, list(got[END].values()))
        if failures and (not ready or END in ready):
            raise _Failed(failures)
        if not ready:
            raise GraphRunError("no tasks to execute")
        key = ready[0]
        resolved.add(key)
        try:
            deliver(key, _run_node(spec.node(key), _merge(key, list(got[key].values())), trace, once=once))
        except FanInMergeError as exc:
            failures.append(exc)
        except _Failed as failed:
            failures += failed.errors


# ---------------------------------------------------------------------------------------------------------------
# Comparing outcomes


def same_outcome(engine_error: BaseException | None, expected: Trace | GraphRunError | None) -> bool:
    """Whether the engine's error (None: success) is one the reference allows.

    An error from inside a sub-graph may arrive wrapped in a ``NodeRunError`` naming the sub-graph node (Eino
    keeps the inner error's kind and prefixes its path); both spellings are accepted. A ``NodeRunError`` must
    name the same node path.
    """
    allowed = expected.errors if isinstance(expected, Trace) else [] if expected is None else [expected]
    if engine_error is None or not allowed:
        return engine_error is None and not allowed
    got = _unwrap(engine_error)
    for option in map(_unwrap, allowed):
        if type(got) is type(option) and getattr(got, "node_path", None) == getattr(option, "node_path", None):
            return True
    return False


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, NodeRunError) and isinstance(exc.__cause__, GraphRunError):
        exc = exc.__cause__
    return exc


# ---------------------------------------------------------------------------------------------------------------
# Leak checks


@asynccontextmanager
async def assert_no_leaks() -> AsyncIterator[None]:
    """Fail (``AssertionError``) if the block leaves a stream reader open or a task running.

    Streams: every reader created inside the block must be closed or read to its end (a reader nobody references
    any more counts as open until it is garbage-collected: it was never closed). Tasks: every task started inside
    the block must have ended (the check first waits until all tasks are blocked).

    Example::

        async with assert_no_leaks():
            reader = await runnable.stream(x)
            await reader.aclose()
    """
    from compose import stream

    before_readers = Counter(stream._open_reader_report())
    before_tasks = {t.id for t in anyio.get_running_tasks()}
    yield
    await anyio.wait_all_tasks_blocked()
    current = anyio.get_current_task().id
    tasks = [t.name for t in anyio.get_running_tasks() if t.id not in before_tasks and t.id != current]
    readers = Counter(stream._open_reader_report()) - before_readers
    assert not tasks, f"tasks left running: {tasks}"
    assert not readers, f"stream readers left open: {sorted(readers)}"


# ---------------------------------------------------------------------------------------------------------------
# Scripted model runs (for agents)


@dataclass(frozen=True, slots=True)
class ChatScript:
    """A scripted model run: ``rounds`` of tool calls (each a tuple of tool names called in parallel), then a
    final answer ``final``. Call ``r``'s ``i``-th tool call has id and ``key`` argument ``f"r{r}c{i}"``.

    ``chunk_size`` is the streamed piece size; ``fail_at_call`` makes that model call (0-based) raise
    ``ModelServerError``; ``fail_at_chunk`` = (call, chunk) makes that call's stream deliver the error instead of
    that chunk. ``model()`` builds the :class:`ScriptedChatModel`.
    """

    rounds: tuple[tuple[str, ...], ...]
    final: str = "done"
    chunk_size: int = 4
    fail_at_call: int | None = None
    fail_at_chunk: tuple[int, int] | None = None

    def responses(self) -> list[Message]:
        """The scripted assistant messages, one per model call."""
        out = [
            assistant_message(
                "",
                tool_calls=[
                    ToolCall(
                        id=f"r{r}c{i}", function=FunctionCall(name=name, arguments=json.dumps({"key": f"r{r}c{i}"}))
                    )
                    for i, name in enumerate(calls)
                ],
            )
            for r, calls in enumerate(self.rounds)
        ]
        return [*out, assistant_message(self.final)]

    def model(self) -> ScriptedChatModel:
        """A fresh ``ScriptedChatModel`` playing this script."""
        fail = ModelServerError("injected failure")
        return ScriptedChatModel(
            self.responses(),
            chunk_size=self.chunk_size,
            fail_at_call={self.fail_at_call: fail} if self.fail_at_call is not None else None,
            fail_at_chunk={self.fail_at_chunk: fail} if self.fail_at_chunk is not None else None,
        )

    def call_ids(self, round_: int) -> list[str]:
        """The tool call ids of round ``round_``, in call order."""
        return [f"r{round_}c{i}" for i in range(len(self.rounds[round_]))]


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis strategies


def graph_inputs() -> SearchStrategy[dict[str, str]]:
    """Graph inputs: ``{"in": text}`` with 1-4 characters from ``xyz``."""
    from hypothesis import strategies as st

    return st.builds(lambda s: {"in": s}, st.text("xyz", min_size=1, max_size=4))


def graphs(
    mode: Mode | None = None,
    *,
    max_nodes: int = 6,
    sub_graphs: bool = True,
    stream_nodes: bool = True,
    failures: bool = True,
    duplicate_keys: bool = False,
    max_run_steps: bool = True,
) -> SearchStrategy[GraphSpec]:
    """Random valid graph specs (see :class:`GraphSpec`): lambda and stream nodes, edges, value and stream
    branches, multi-branches, fan-in through output keys, bounded and unbounded loops in Pregel mode,
    sub-graphs (one level), and both trigger modes (``mode=None``: either).

    ``duplicate_keys`` lets several nodes share an output key (fan-in may then fail with ``FanInMergeError``
    in invoke runs; streaming runs concatenate the clashing values in arrival order, so do not compare them);
    ``failures`` lets nodes raise; ``max_run_steps`` sometimes sets an explicit step limit (Pregel mode).
    """
    from hypothesis import strategies as st

    @st.composite
    def spec(draw: st.DrawFn, mode: Mode | None, prefix: str, depth: int) -> GraphSpec:
        m: Mode = mode if mode is not None else draw(st.sampled_from(MODES))
        top = prefix == ""
        count = draw(st.integers(1, max_nodes if top else max(1, max_nodes // 2)))
        keys = [f"{prefix}n{i}" for i in range(count)]
        kinds = ["invoke"] * 3 + ["stream"] * stream_nodes + ["sub"] * (depth > 0)
        nodes: list[NodeSpec] = []
        for key in keys:
            kind = draw(st.sampled_from(kinds))
            out_key = draw(st.sampled_from(["k0", "k1", key])) if duplicate_keys else ""
            if kind == "sub":
                nodes.append(NodeSpec(key, sub=draw(spec(None, f"{key}_", depth - 1)), output_key=out_key))
                continue
            can_fail = failures and kind == "invoke" and draw(st.integers(0, 9)) == 0
            nodes.append(
                NodeSpec(
                    key,
                    tag=draw(st.text("abcdefg", min_size=1, max_size=2)),
                    chunks=draw(st.integers(2, 3)) if kind == "stream" else 1,
                    output_key=out_key,
                    fails_on=draw(st.sampled_from("xyab")) if can_fail else "",
                )
            )
        lambdas = {n.key for n in nodes if n.sub is None}
        # every node gets a parent before it (so START reaches it) and a child after it (so it reaches END)
        succ: dict[str, set[str]] = {k: set() for k in [START, *keys]}
        for i, key in enumerate(keys):
            succ[draw(st.sampled_from([START, *keys[:i]]))].add(key)
            succ[key].add(draw(st.sampled_from([*keys[i + 1 :], END])))
        for _ in range(draw(st.integers(0, count))):  # extra forward edges: fan-out and fan-in
            i = draw(st.integers(0, count - 1))
            succ[keys[i]].add(draw(st.sampled_from([*keys[i + 1 :], END])))
        loops: list[BranchSpec] = []
        if m == "any_predecessor":
            if draw(st.integers(0, 3)) == 0:  # an unbounded loop: an edge back (END may still win)
                i = draw(st.integers(0, count - 1))
                succ[keys[i]].add(draw(st.sampled_from(keys[: i + 1])))
            if draw(st.booleans()):  # a loop bounded by the length of the text
                i = draw(st.integers(0, count - 1))
                back, exit_ = draw(st.sampled_from(keys[: i + 1])), draw(st.sampled_from([*keys[i + 1 :], END]))
                succ[keys[i]] -= {back, exit_}
                stream = draw(st.booleans())
                loops.append(
                    BranchSpec(keys[i], (back, exit_), "length", stream, threshold=draw(st.integers(2, WINDOW)))
                )
        edges: list[tuple[str, str]] = []
        branches: list[BranchSpec] = []
        for source, targets in succ.items():
            rest = sorted(targets)
            # a stream branch may decide on the first chunk only where that chunk starts the whole text
            prefix_ok = source in lambdas or (source == START and top)
            while rest and all(b.source != source for b in loops) and draw(st.integers(0, 2)) == 0:
                size = draw(st.integers(1, len(rest)))
                ends, rest = tuple(rest[:size]), rest[size:]
                stream = draw(st.booleans())
                rule: Rule = draw(st.sampled_from(RULES)) if prefix_ok or not stream else "hash"
                branches.append(BranchSpec(source, ends, rule, stream, multi=draw(st.booleans())))
            edges.extend((source, t) for t in rest)
        limit = None
        if m == "any_predecessor" and max_run_steps and top and draw(st.integers(0, 3)) == 0:
            limit = draw(st.integers(1, count + 10))
        return GraphSpec(m, tuple(nodes), tuple(edges), tuple(branches + loops), limit)

    return spec(mode, "", 1 if sub_graphs else 0)


def chat_scripts(
    tools: tuple[str, ...] = ("echo",),
    *,
    max_rounds: int = 5,
    max_parallel: int = 3,
    failures: bool = False,
) -> SearchStrategy[ChatScript]:
    """Random :class:`ChatScript`s: up to ``max_rounds`` rounds of 1..``max_parallel`` parallel calls of ``tools``,
    a final answer, a chunk size, and (``failures=True``) sometimes an injected failure at a model call or at a
    chunk of a streamed call."""
    from hypothesis import strategies as st

    @st.composite
    def script(draw: st.DrawFn) -> ChatScript:
        rounds = draw(
            st.lists(
                st.lists(st.sampled_from(tools), min_size=1, max_size=max_parallel).map(tuple), max_size=max_rounds
            )
        )
        calls = len(rounds) + 1
        fail_at_call = fail_at_chunk = None
        if failures:
            kind = draw(st.sampled_from(["none", "call", "chunk"]))
            if kind == "call":
                fail_at_call = draw(st.integers(0, calls - 1))
            elif kind == "chunk":
                fail_at_chunk = (draw(st.integers(0, calls - 1)), draw(st.integers(0, 4)))
        return ChatScript(
            tuple(rounds),
            final=draw(st.text("abc ", min_size=1, max_size=12)),
            chunk_size=draw(st.integers(1, 8)),
            fail_at_call=fail_at_call,
            fail_at_chunk=fail_at_chunk,
        )

    return script()
