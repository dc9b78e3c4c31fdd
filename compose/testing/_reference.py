"""The reference interpreter: a graph spec run with plain loops, no concurrency and no streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compose.errors import FanInMergeError, GraphRunError, MaxStepsExceededError, NodeRunError
from compose.graph.builder import END, START

if TYPE_CHECKING:
    pass

from compose.testing._spec import GraphSpec, NodeSpec, flat, node_text

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
    # every node run (sub-graph nodes included) in order: (namespace, key, output before the output key wraps it)
    outputs: list[tuple[tuple[str, ...], str, Any]] = field(default_factory=list)

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


def _run_graph(
    spec: GraphSpec,
    value: Any,
    max_run_steps: int | None,
    trace: Trace,
    *,
    top: bool,
    once: bool,
    ns: tuple[str, ...] = (),
) -> Any:
    """``once``: this graph runs at most once in the top graph's run (its skips are recorded); ``ns``: the
    sub-graph node keys it runs in."""
    if spec.mode == "all_predecessor":
        return _run_dag(spec, value, trace, once=once, ns=ns)
    limit = max_run_steps if max_run_steps is not None else spec.step_limit()
    return _run_pregel(spec, value, limit, trace, top=top, ns=ns)


def _run_node(
    node: NodeSpec, value: Any, trace: Trace, *, once: bool = False, ns: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A node's output; raises ``_Failed`` with the errors it may fail with."""
    if node.sub is not None:
        try:
            out = _run_graph(
                node.sub, value, node.sub.max_run_steps, trace, top=False, once=once, ns=(*ns, node.key)
            )
        except (_Failed, GraphRunError) as exc:  # a node path grows as the error leaves the sub-graph
            errors = exc.errors if isinstance(exc, _Failed) else [exc]
            raise _Failed([e.with_parent(node.key) if isinstance(e, NodeRunError) else e for e in errors]) from None
        trace.outputs.append((ns, node.key, out))
        return {node.out_key: out}
    trace.executed.append(node.key)
    try:
        text = node_text(node, value)
    except ValueError as exc:
        raise _Failed([NodeRunError([node.key], exc)]) from None
    trace.outputs.append((ns, node.key, text))
    return {node.out_key: text}


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


def _run_pregel(spec: GraphSpec, value: Any, limit: int, trace: Trace, *, top: bool, ns: tuple[str, ...] = ()) -> Any:
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
                outputs[key] = _run_node(spec.node(key), v, trace, ns=ns)
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


def _run_dag(spec: GraphSpec, value: Any, trace: Trace, *, once: bool, ns: tuple[str, ...] = ()) -> Any:
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
            deliver(key, _run_node(spec.node(key), _merge(key, list(got[key].values())), trace, once=once, ns=ns))
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
