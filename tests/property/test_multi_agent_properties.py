"""Property (issue 14): random trees of ``SequentialAgent`` / ``ParallelAgent`` / ``LoopAgent`` over scripted
``ChatModelAgent``s, run through ``Runner``, agree with a small reference interpreter of the workflow rules
(Eino's ``workflow.go``, as ``adk.agents.workflow`` states them), written below in plain Python.

Each leaf plays one *turn* per run (cycling through its list): ``answer`` (one model call), ``tool`` (a tool
round, then an answer), ``approve`` (the same with a tool that needs approval), ``break`` (a tool sending a
``BreakLoopAction``, then an answer), ``exit`` (the exit tool) or ``fail`` (the model call raises). The rules the
interpreter follows:

* Sequential runs its children in order, a child's run path being the parent's plus the names of every child run
  so far (a Loop's accumulate over its iterations too);
* an error is the run's last event (it stops every workflow, a Parallel's other children too: their events are
  then any prefix of what they would have been, their effects uncertain);
* Exit stops every enclosing workflow (leaves under a Parallel never exit: whether the Parallel's last event is the
  exit depends on the interleaving, and so does whether the workflow above stops);
* a break is marked done by the nearest enclosing loop, with its 0-based iteration, and stops that loop once the
  child it came from has finished; outside any loop it stays not done;
* a Parallel runs its children on their own lanes: its events are one contiguous block in which each child's
  events keep their order; each lane sees the history recorded before the Parallel, then its own, and the lanes
  are joined after it (in recording order: one interleaving of them);
* a leaf run is given the root input, then every recorded message it sees, other agents' retold (Eino's texts);
* approval is automatic in the reference. The same tree is run twice through pyeino: without approval, and with
  every ``pay_*`` tool needing it, approving every pending interrupt and resuming until the run ends; both must
  give the reference's events, session values, termination reason, model calls, tool executions (so no
  finished child or iteration runs again after a resume) and leaf inputs, with no stream or task left over.

Two library issues the property found (a loop's break lost across a pause of the same child, and a Parallel
leaving the streams of events it drops open) are fixed; their minimal examples are at the end of the module.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections import Counter, defaultdict
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from adk.agent import Agent, AgentContext
from adk.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from adk.chat_model.actions import send_tool_gen_action
from adk.chat_model.agent import ChatModelAgent
from adk.events import AgentAction, AgentEvent, AgentInput, AgentInterruptInfo, AgentOutput, MessageVariant
from adk.middlewares.approval import ApprovalDecision, ApprovalMiddleware
from adk.runner import AgentRun, Runner
from compose import stream
from compose.checkpoint import InMemoryCheckPointStore
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, assistant_message
from compose.stream import StreamReader
from compose.tools import BaseTool, tool

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_task_leaks")]

# ---------------------------------------------------------------------------------------------------------------
# Trees


@dataclass(frozen=True)
class Leaf:
    name: str
    turns: tuple[str, ...]
    output_key: str | None


@dataclass(frozen=True)
class Flow:
    kind: str  # "seq" | "par" | "loop"
    name: str
    children: tuple[Leaf | Flow, ...]
    max_iterations: int = 0  # loops only; 0 = unbounded (then a child always breaks)


Node = Leaf | Flow

TURNS_ANYWHERE = ("answer", "answer", "tool", "approve", "approve", "break", "break", "fail")


@st.composite
def _leaf_shape(draw: Any, in_parallel: bool) -> tuple[Any, ...]:
    choices = TURNS_ANYWHERE if in_parallel else (*TURNS_ANYWHERE, "exit")
    turns = tuple(draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3)))
    return ("leaf", turns, draw(st.booleans()))


@st.composite
def _flow_shape(draw: Any, depth: int = 1, in_parallel: bool = False) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(["seq", "par", "loop"]))
    below_parallel = in_parallel or kind == "par"
    children: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 3 and draw(st.integers(0, 3)) == 0:
            children.append(draw(_flow_shape(depth + 1, below_parallel)))
        else:
            children.append(draw(_leaf_shape(below_parallel)))
    max_iterations = draw(st.integers(0, 3)) if kind == "loop" else 0
    if kind == "loop" and max_iterations == 0:  # unbounded: a child that surely breaks in the first iteration
        breaker = ("leaf", ("break",), False)
        children = [*children[:3], breaker]
    return ("flow", kind, children, max_iterations)


def _name(shape: tuple[Any, ...], counter: Counter[str]) -> Node:
    if shape[0] == "leaf":
        counter["leaf"] += 1
        name = f"L{counter['leaf']}"
        return Leaf(name, shape[1], f"k_{name}" if shape[2] else None)
    _, kind, children, max_iterations = shape
    counter[kind] += 1
    name = f"{kind}{counter[kind]}"
    return Flow(kind, name, tuple(_name(c, counter) for c in children), max_iterations)


trees = _flow_shape().map(lambda shape: _name(shape, Counter()))


def leaves(node: Node) -> list[Leaf]:
    if isinstance(node, Leaf):
        return [node]
    return [leaf for c in node.children for leaf in leaves(c)]


# ---------------------------------------------------------------------------------------------------------------
# Event signatures: what is compared (agent, run path, role, tool, content, tool calls, action, error)

Sig = tuple[Any, ...]


def sig(
    agent: str,
    path: tuple[str, ...],
    role: str | None,
    content: str | None,
    *,
    tool_name: str | None = None,
    calls: tuple[str, ...] = (),
    action: Any = None,
    error: str | None = None,
) -> Sig:
    return (agent, path, role, tool_name, content, calls, action, error)


def boom(name: str) -> str:
    return f"boom {name}"


async def event_sig(event: AgentEvent, failing: Sequence[str]) -> Sig:
    if event.error is not None:
        text = str(event.error)
        found = [boom(n) for n in failing if re.search(rf"{boom(n)}\b", text)]
        return sig(event.agent_name, tuple(event.run_path), None, None, error=found[0] if found else repr(event.error))
    variant = event.message
    assert variant is not None, f"an event with neither message nor error: {event!r}"
    message = await variant.get_message()
    action: Any = None
    if event.action is not None:
        a = event.action
        if a.exit and a.break_loop is None and a.transfer_to_agent is None:
            action = ("exit",)
        elif a.break_loop is not None and not a.exit:
            action = ("break", a.break_loop.from_agent, a.break_loop.done, a.break_loop.current_iterations)
        else:
            action = repr(a)
    return sig(
        event.agent_name,
        tuple(event.run_path),
        variant.role,
        message.content,
        tool_name=variant.tool_name,
        calls=tuple(c.function.name for c in message.tool_calls),
        action=action,
    )


# ---------------------------------------------------------------------------------------------------------------
# The reference interpreter


@dataclass
class Item:
    sig: Sig


@dataclass
class Concat:
    parts: list[Trace]


@dataclass
class Shuffle:
    """A Parallel's block: each child's events in order, interleaved; ``truncated``: an error stopped it."""

    parts: list[Trace]
    agents: list[frozenset[str]]
    truncated: bool


Trace = Item | Concat | Shuffle


@dataclass
class Effects:
    """What runs leave behind; ``maybe_*``: effects of a Parallel's children cut short by an error (they may or
    may not have happened)."""

    model_calls: Counter[str] = field(default_factory=Counter)
    tool_runs: Counter[str] = field(default_factory=Counter)
    values: dict[str, str] = field(default_factory=dict)
    written: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    approvals: set[str] = field(default_factory=set)
    maybe_model_calls: Counter[str] = field(default_factory=Counter)
    maybe_tool_runs: Counter[str] = field(default_factory=Counter)
    maybe_values: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    maybe_approvals: set[str] = field(default_factory=set)

    def write(self, key: str | None, value: str) -> None:
        if key is not None:
            self.values[key] = value
            self.written[key].add(value)

    def merge(self, other: Effects, *, certain: bool) -> None:
        self.maybe_model_calls.update(other.maybe_model_calls)
        self.maybe_tool_runs.update(other.maybe_tool_runs)
        self.maybe_approvals |= other.maybe_approvals
        for k, vs in other.maybe_values.items():
            self.maybe_values[k] |= vs
        if certain:
            self.model_calls.update(other.model_calls)
            self.tool_runs.update(other.tool_runs)
            self.values.update(other.values)
            for k, vs in other.written.items():
                self.written[k] |= vs
            self.approvals |= other.approvals
        else:
            self.maybe_model_calls.update(other.model_calls)
            self.maybe_tool_runs.update(other.tool_runs)
            for k, vs in other.written.items():
                self.maybe_values[k] |= vs
            self.maybe_approvals |= other.approvals


def tool_names(leaf: str) -> dict[str, str]:
    return {"tool": f"work_{leaf}", "approve": f"pay_{leaf}", "break": f"stop_{leaf}"}


def tool_result(turn: str, leaf: str) -> str:
    return {"tool": f"{leaf} worked", "approve": f"{leaf} paid", "break": f"{leaf} stopping"}[turn]


class Reference:
    """Runs a tree by the rules (approval automatic), producing its trace, effects and how it ends."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.loops: list[list[Any]] = []  # [iteration, broke] of each enclosing loop, innermost last
        self.fx = Effects()
        # the enclosing workflows, innermost last: ("loop", frame) / ("par", pauses waiting for its end) / ("seq",)
        self.stack: list[tuple[Any, ...]] = []
        # a pause (with approval asked) reaches a loop that a break has already stopped (see test_break_then_pause)
        self.break_lost_in_pause = False
        # an error stops a Parallel (see test_parallel_error_closes_the_streams_it_drops)
        self.error_in_parallel = False
        # the history: what the lanes above this one hold, and this lane's records (as traces: a Parallel's lanes
        # are joined in the order their events were recorded, one interleaving)
        self.above: list[Trace] = []
        self.lane: list[Trace] = []
        # the history each leaf run is given (its first model call's messages, after the root input)
        self.inputs: dict[tuple[str, int], list[Trace]] = {}

    def _pause_from(self, depth: int) -> None:
        """A pause goes up from ``stack[:depth]``: through sequences and loops now, through a Parallel once it
        ends (it waits for its other children)."""
        for entry in reversed(self.stack[:depth]):
            if entry[0] == "par":
                entry[1].append(True)
                return
            if entry[0] == "loop" and entry[1][1]:
                self.break_lost_in_pause = True

    def run(self, node: Node, path: tuple[str, ...], address: tuple[str, ...]) -> tuple[Trace, str | None]:
        """``node``'s trace and what stopped it: None, ``"exit"`` or ``"error"``."""
        if isinstance(node, Leaf):
            return self._leaf(node, path, address)
        if node.kind == "par":
            self.stack.append(("par", []))
            try:
                return self._parallel(node, path, address)
            finally:
                if self.stack.pop()[1]:
                    self._pause_from(len(self.stack))
        parts: list[Trace] = []
        current = path
        frame: list[Any] | None = None
        if node.kind == "loop":
            frame = [0, False]
            self.loops.append(frame)
        self.stack.append(("loop", frame) if frame is not None else ("seq",))
        try:
            iteration = 0
            while True:
                if frame is not None:
                    if node.max_iterations and iteration >= node.max_iterations:
                        break
                    assert iteration < 8, "an unbounded loop in a generated tree does not stop"
                    frame[0] = iteration
                for child in node.children:
                    current = (*current, child.name)
                    trace, stop = self.run(child, current, (*address, child.name))
                    parts.append(trace)
                    if stop is not None:
                        return Concat(parts), stop
                    if frame is not None and frame[1]:
                        return Concat(parts), None
                if frame is None:
                    break
                iteration += 1
            return Concat(parts), None
        finally:
            self.stack.pop()
            if frame is not None:
                self.loops.pop()

    def _parallel(self, node: Flow, path: tuple[str, ...], address: tuple[str, ...]) -> tuple[Trace, str | None]:
        results = []
        outer, above, lane = self.fx, self.above, self.lane
        lanes: list[list[Trace]] = []
        for child in node.children:
            self.fx, self.above, self.lane = Effects(), [*above, *lane], []
            trace, stop = self.run(child, (*path, child.name), (*address, child.name))
            assert stop != "exit", "no leaf exits under a Parallel"
            results.append((trace, stop, self.fx))
            lanes.append(self.lane)
        self.fx, self.above, self.lane = outer, above, lane
        agents = [frozenset(x.name for x in leaves(c)) for c in node.children]
        failing = [i for i, (_, stop, _) in enumerate(results) if stop == "error"]
        self.error_in_parallel |= bool(failing)
        for i, (_, _, fx) in enumerate(results):
            outer.merge(fx, certain=not failing or failing == [i])
        if not failing:  # (after an error nothing reads the history)
            lane.append(Shuffle([Concat(x) for x in lanes], agents, False))
        return Shuffle([t for t, _, _ in results], agents, bool(failing)), "error" if failing else None

    def _leaf(self, leaf: Leaf, path: tuple[str, ...], address: tuple[str, ...]) -> tuple[Trace, str | None]:
        name, k = leaf.name, self.runs[leaf.name]
        self.inputs[(leaf.name, k)] = [*self.above, *self.lane]
        trace, stop = self._turn(leaf, k, path, address)
        for item in flatten(trace):  # the leaf's events with a message are recorded
            agent, _, role, tool_name, content, calls, _, error = item
            if error is None:
                args = [f'{{"final_result": "{name}:{k}"}}' if c == "exit" else "{}" for c in calls]
                self.lane.append(Item((agent, role, content, tool_name, tuple(zip(calls, args, strict=True)))))
        return trace, stop

    def _turn(
        self, leaf: Leaf, k: int, path: tuple[str, ...], address: tuple[str, ...]
    ) -> tuple[Trace, str | None]:
        name = leaf.name
        self.runs[name] += 1
        turn = leaf.turns[k % len(leaf.turns)]
        final = f"{name}:{k}"
        fx = self.fx
        if turn == "fail":
            fx.model_calls[name] += 1
            return Concat([Item(sig(name, path, None, None, error=boom(name)))]), "error"
        if turn == "exit":
            fx.model_calls[name] += 1
            fx.write(leaf.output_key, final)
            return Concat(
                [
                    Item(sig(name, path, "assistant", "", calls=("exit",))),
                    Item(sig(name, path, "tool", final, tool_name="exit", action=("exit",))),
                ]
            ), "exit"
        if turn == "answer":
            fx.model_calls[name] += 1
            fx.write(leaf.output_key, final)
            return Concat([Item(sig(name, path, "assistant", final))]), None
        tool_name = tool_names(name)[turn]
        fx.model_calls[name] += 2
        fx.tool_runs[tool_name] += 1
        action: Any = None
        if turn == "break":
            if self.loops:
                loop = self.loops[-1]
                loop[1] = True
                action = ("break", name, True, loop[0])
            else:
                action = ("break", name, False, 0)
        if turn == "approve":
            self._pause_from(len(self.stack))
            fx.approvals.add(";".join(f"agent:{n}" for n in address) + f";tool:{tool_name}:{name}c{k}")
        fx.write(leaf.output_key, final)
        return Concat(
            [
                Item(sig(name, path, "assistant", "", calls=(tool_name,))),
                Item(sig(name, path, "tool", tool_result(turn, name), tool_name=tool_name, action=action)),
                Item(sig(name, path, "assistant", final)),
            ]
        ), None


# ---------------------------------------------------------------------------------------------------------------
# Matching a run's events against a trace


def full_length(trace: Trace) -> int:
    if isinstance(trace, Item):
        return 1
    if isinstance(trace, Shuffle):
        assert not trace.truncated
    return sum(full_length(p) for p in trace.parts)


def variable(trace: Trace) -> bool:
    """Its length is not known (an error cut a Parallel short inside it: always the run's end)."""
    if isinstance(trace, Item):
        return False
    if isinstance(trace, Shuffle):
        return trace.truncated or any(variable(p) for p in trace.parts)
    return bool(trace.parts) and variable(trace.parts[-1])


def matches(trace: Trace, events: Sequence[Sig], prefix: bool = False) -> bool:
    """``events`` are one ordering of ``trace`` (with ``prefix``: the start of one)."""
    if isinstance(trace, Item):
        return (len(events) == 1 and events[0] == trace.sig) or (prefix and not events)
    if isinstance(trace, Shuffle):
        owners = [[e for e in events if e[0] in agents] for agents in trace.agents]
        if sum(len(o) for o in owners) != len(events):
            return False
        cut = prefix or trace.truncated
        return all(matches(p, o, cut) for p, o in zip(trace.parts, owners, strict=True))
    pos = 0
    for i, part in enumerate(trace.parts):
        if variable(part):
            assert i == len(trace.parts) - 1
            return matches(part, events[pos:], prefix)
        n = full_length(part)
        segment = events[pos : pos + n]
        if len(segment) < n:
            return prefix and matches(part, segment, True)
        if not matches(part, segment, prefix and pos + n == len(events)):
            return False
        pos += n
    return pos == len(events)


def per_agent(events: Sequence[Sig]) -> dict[str, list[Sig]]:
    out: dict[str, list[Sig]] = defaultdict(list)
    for e in events:
        out[e[0]].append(e)
    return dict(out)


def flatten(trace: Trace) -> list[Sig]:
    if isinstance(trace, Item):
        return [trace.sig]
    return [s for p in trace.parts for s in flatten(p)]


def retold(record: Sig, reader: str) -> Sig:
    """A recorded message as agent ``reader`` is given it (Eino's default history rewriter): its own as it is,
    another agent's retold in a user message."""
    agent, role, content, tool_name, calls = record
    if agent == reader:
        return (agent, role, content, calls)
    text = "For context:"
    if role == "assistant":
        if content:
            text += f" [{agent}] said: {content}."
        for call_name, args in calls:
            text += f" [{agent}] called tool: `{call_name}` with arguments: {args}."
    elif role == "tool" and content:
        text += f" [{agent}] `{tool_name}` tool returned result: {content}."
    return (agent, "user", text, ())


def render(trace: Trace, reader: str) -> Trace:
    if isinstance(trace, Item):
        return Item(retold(trace.sig, reader))
    if isinstance(trace, Shuffle):
        return Shuffle([render(p, reader) for p in trace.parts], trace.agents, trace.truncated)
    return Concat([render(p, reader) for p in trace.parts])


_TOLD = re.compile(r"For context: \[([^\]]*)\]")


def given_messages(messages: Sequence[Message], reader: str) -> list[Sig]:
    """A model call's messages as (agent, role, content, tool calls): a retold message names its agent."""
    out: list[Sig] = []
    for m in messages:
        calls = tuple((c.function.name, c.function.arguments) for c in m.tool_calls)
        if m.role == "user":
            told = _TOLD.match(m.content)
            out.append((told.group(1) if told else "", "user", m.content, calls))
        else:
            out.append((reader, m.role, m.content, calls))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The tree as pyeino agents


def call(name: str, id: str, args: str = "{}") -> Message:
    calls = [ToolCall(id=id, function=FunctionCall(name=name, arguments=args))]
    return Message(role="assistant", content="", tool_calls=calls)


class Built:
    """One build of a tree as pyeino agents (fresh agents, models and tool counters)."""

    def __init__(self, tree: Flow, *, approval: bool) -> None:
        self.tool_runs: Counter[str] = Counter()
        self.models: dict[str, ScriptedChatModel] = {}
        self.first_calls: dict[str, list[int]] = defaultdict(list)  # per leaf, its runs' first model calls
        self.approval = approval
        self.root = self._build(tree, 1)

    def _build(self, node: Node, runs: int) -> Agent:
        if isinstance(node, Leaf):
            return self._leaf(node, runs)
        if node.kind == "seq":
            return SequentialAgent(node.name, "seq", [self._build(c, runs) for c in node.children])
        if node.kind == "par":
            return ParallelAgent(node.name, "par", [self._build(c, runs) for c in node.children])
        inner = runs * (node.max_iterations or 1)
        return LoopAgent(node.name, "loop", [self._build(c, inner) for c in node.children], node.max_iterations)

    def _tool(self, turn: str, leaf: str) -> BaseTool:
        name = tool_names(leaf)[turn]
        result = tool_result(turn, leaf)

        @tool(name=name)
        async def act() -> str:
            """Do it."""
            self.tool_runs[name] += 1
            if turn == "break":
                await send_tool_gen_action(AgentAction.new_break_loop(leaf))
            return result

        return act

    def _leaf(self, leaf: Leaf, runs: int) -> ChatModelAgent:
        name = leaf.name
        script: list[Message | str] = []
        fail_at: dict[int, BaseException] = {}
        for k in range(runs):  # the most runs the leaf can have (an unbounded loop breaks in its first iteration)
            turn = leaf.turns[k % len(leaf.turns)]
            final = f"{name}:{k}"
            self.first_calls[name].append(len(script))
            if turn == "fail":
                fail_at[len(script)] = RuntimeError(boom(name))
                script.append("never played")
                break  # the run ends there
            if turn == "exit":
                script.append(call("exit", f"{name}c{k}", f'{{"final_result": "{final}"}}'))
            elif turn == "answer":
                script.append(final)
            else:
                script += [call(tool_names(name)[turn], f"{name}c{k}"), final]
        model = ScriptedChatModel(script, fail_at_call=fail_at)
        self.models[name] = model
        needs_approval: Callable[[str, str], bool] | None = (
            (lambda tool_name, args: tool_name.startswith("pay_")) if self.approval else None
        )
        return ChatModelAgent(
            name,
            f"leaf {name}",
            model=model,
            tools=[self._tool(t, name) for t in ("tool", "approve", "break")],
            exit_tool="exit" in leaf.turns,
            output_key=leaf.output_key,
            middlewares=[ApprovalMiddleware(needs_approval)] if needs_approval is not None else [],
        )

    def model_calls(self) -> Counter[str]:
        return Counter({name: len(m.calls) for name, m in self.models.items() if m.calls})

    def inputs(self) -> dict[tuple[str, int], list[Sig]]:
        """What each leaf run that happened was given (its first model call's messages)."""
        out = {}
        for name, model in self.models.items():
            for k, index in enumerate(self.first_calls[name]):
                if index < len(model.calls):
                    out[(name, k)] = given_messages(model.calls[index].messages, name)
        return out


async def drain(run: AgentRun, failing: Sequence[str]) -> tuple[list[Sig], AgentInterruptInfo | None]:
    """The run's events as signatures, and the interrupt info of its last event if it paused."""
    events: list[Sig] = []
    paused: AgentInterruptInfo | None = None
    async with run:
        async for event in run:
            assert paused is None, "the interrupt event is the run's last"
            if event.action is not None and event.action.interrupted is not None:
                assert event.error is None and event.output is None
                paused = event.action.interrupted
                continue
            events.append(await event_sig(event, failing))
    return events, paused


@dataclass
class Outcome:
    events: list[Sig]
    values: dict[str, Any]
    reason: str | None
    model_calls: Counter[str]
    tool_runs: Counter[str]
    approvals: list[str]
    inputs: dict[tuple[str, int], list[Sig]]


async def run_plain(tree: Flow, streaming: bool, failing: Sequence[str]) -> Outcome:
    built = Built(tree, approval=False)
    run = Runner(built.root, enable_streaming=streaming).query("go")
    events, paused = await drain(run, failing)
    assert paused is None, "a run without approvals paused"
    values, reason = dict(run.session_values), run.termination_reason
    return Outcome(events, values, reason, built.model_calls(), built.tool_runs, [], built.inputs())


async def run_approving(tree: Flow, streaming: bool, failing: Sequence[str], most_pauses: int) -> Outcome:
    """Approve every pending interrupt and resume, until the run ends."""
    built = Built(tree, approval=True)
    runner = Runner(built.root, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())
    run = runner.query("go", checkpoint_id="cp")
    events: list[Sig] = []
    approvals: list[str] = []
    for _ in range(most_pauses + 1):
        got, paused = await drain(run, failing)
        events += got
        if paused is None:
            values, reason = dict(run.session_values), run.termination_reason
            return Outcome(events, values, reason, built.model_calls(), built.tool_runs, approvals, built.inputs())
        assert run.termination_reason == "interrupted" and paused.checkpoint_id == "cp"
        approvals += [c.address for c in paused.interrupt_contexts]
        run = runner.resume("cp", targets={i: ApprovalDecision(approved=True) for i in paused.ids})
    raise AssertionError(f"still pausing after {most_pauses} resumes (approvals so far: {approvals})")


# ---------------------------------------------------------------------------------------------------------------
# The property

_ABSENT = "<absent>"

# Library issues the property found, fixed (their minimal examples below); True carves them out again.
KNOWN_BREAK_LOST_IN_PAUSE = False  # test_break_then_pause_ends_the_loop_on_resume
KNOWN_PARALLEL_ERROR_LEAK = False  # test_parallel_error_closes_the_streams_it_drops


def check(outcome: Outcome, reference: Reference, trace: Trace, stop: str | None, what: str) -> None:
    fx = reference.fx
    events = outcome.events
    expected_reason = {None: "completed", "exit": "exit", "error": "error"}[stop]
    assert outcome.reason == expected_reason, f"{what}: termination {outcome.reason!r}, expected {expected_reason!r}"
    if not variable(trace):  # no error cut a Parallel short: the events are exactly known, per agent
        assert per_agent(events) == per_agent(flatten(trace)), f"{what}: events per agent differ"
    elif len(events) >= 2 and events[-2][6] is not None and events[-2][6][0] == "break" and not events[-2][6][2]:
        # a loop holds a child's last event with an action until the next one: when that is an error, the held
        # break is handed on as it is, not marked done (Eino drops it); an interleaving decides whether a
        # Parallel's break is held then, so take the reference's marks for it
        [mark] = {e[6] for e in flatten(trace) if e[:6] == events[-2][:6]}
        events = [*events[:-2], (*events[-2][:6], mark, None), events[-1]]
    assert matches(trace, events), f"{what}: events are no ordering of the reference's\n{events}\n{trace}"
    errors = [e for e in events if e[7] is not None]
    if stop == "error":
        assert len(errors) == 1 and events[-1] is errors[0], f"{what}: the error is not the last and only error"
    for key in set(outcome.values) | set(fx.values) | set(fx.maybe_values):
        got = outcome.values.get(key, _ABSENT)
        certain = fx.values.get(key, _ABSENT)
        if key in fx.maybe_values:
            assert got in fx.maybe_values[key] | {certain}, f"{what}: session value {key}={got!r}"
        else:
            assert got == certain, f"{what}: session value {key}={got!r}, expected {certain!r}"
    for counted, certain_counts, maybe in (
        ("model calls", fx.model_calls, fx.maybe_model_calls),
        ("tool runs", fx.tool_runs, fx.maybe_tool_runs),
    ):
        got_counts = outcome.model_calls if counted == "model calls" else outcome.tool_runs
        for name in set(got_counts) | set(certain_counts) | set(maybe):
            low, high = certain_counts[name], certain_counts[name] + maybe[name]
            got = got_counts[name]
            assert low <= got <= high, f"{what}: {counted} of {name}: {got}, expected {low}..{high}"
    root = Item(("", "user", "go", ()))
    for (name, k), messages in outcome.inputs.items():
        expected = Concat([root, *(render(t, name) for t in reference.inputs[(name, k)])])
        assert matches(expected, messages), f"{what}: run {k} of {name} was given {messages}, expected {expected}"


def running_tasks() -> set[Any]:
    return {t.id for t in anyio.get_running_tasks()}


async def assert_no_leaks(tasks_before: set[Any], *, streams: bool = True) -> None:
    await anyio.wait_all_tasks_blocked()
    current = anyio.get_current_task().id
    left = [t.name for t in anyio.get_running_tasks() if t.id not in tasks_before and t.id != current]
    assert not left, f"tasks left running: {left}"
    if streams:  # open readers still alive, or collected while open (no gc.collect needed)
        leaked = stream._open_reader_report()
        assert not leaked, f"stream readers left open: {leaked}"
    stream._reset_leak_tracking()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(tree=trees, streaming=st.booleans())
async def test_workflow_trees_follow_the_reference(tree: Flow, streaming: bool) -> None:
    reference = Reference()
    trace, stop = reference.run(tree, (tree.name,), (tree.name,))
    fx = reference.fx
    failing = [leaf.name for leaf in leaves(tree) if "fail" in leaf.turns]
    event(f"the run ends: {stop or 'completed'}")
    stream._reset_leak_tracking()
    before = running_tasks()
    # known issue: the events a Parallel drops after a child's error keep their streams open
    streams = not (KNOWN_PARALLEL_ERROR_LEAK and streaming and reference.error_in_parallel)
    if not streams:
        event("known issue: an error in a Parallel while streaming (streams not checked)")

    plain = await run_plain(tree, streaming, failing)
    check(plain, reference, trace, stop, "uninterrupted run")
    await assert_no_leaks(before, streams=streams)

    approvals = len(fx.approvals) + len(fx.maybe_approvals)
    if KNOWN_BREAK_LOST_IN_PAUSE and reference.break_lost_in_pause:  # the resumed loop goes on: not comparable
        event("known issue: a break lost in a pause (the approved run is only checked for leaks)")
        with contextlib.suppress(AssertionError):
            await run_approving(tree, streaming, failing, approvals)
        await assert_no_leaks(before, streams=streams)
        return
    approving = await run_approving(tree, streaming, failing, approvals)
    check(approving, reference, trace, stop, "run approved and resumed")
    event(f"interrupts approved: {min(len(approving.approvals), 3)}{'+' if len(approving.approvals) >= 3 else ''}")
    assert len(approving.approvals) == len(set(approving.approvals)), "an approved call was asked for again"
    assert fx.approvals <= set(approving.approvals) <= fx.approvals | fx.maybe_approvals
    await assert_no_leaks(before, streams=streams)


# ---------------------------------------------------------------------------------------------------------------
# Issues the property found (fixed): minimal examples


async def test_break_then_pause_ends_the_loop_on_resume() -> None:
    """A break, then a pause, in the same iteration: the resumed loop must stop as the uninterrupted one does.

    ``loop(max_iterations=2)[seq[B, P]]``: B's tool breaks the loop in iteration 0, then P's tool asks for approval.
    Without approval the loop stops after ``seq`` (B's model is called twice, P pays once). With approval the
    loop pauses; the break it had already taken is not in its saved state, so the resumed loop starts
    iteration 1: B runs again and P asks for approval again."""
    tree = Flow(
        "loop",
        "loop",
        (Flow("seq", "seq", (Leaf("B", ("break",), None), Leaf("P", ("approve",), None))),),
        max_iterations=2,
    )
    reference = Reference()
    trace, stop = reference.run(tree, (tree.name,), (tree.name,))
    assert reference.break_lost_in_pause and stop is None
    plain = await run_plain(tree, False, [])
    check(plain, reference, trace, stop, "uninterrupted run")  # without a pause all is well
    assert plain.model_calls == Counter({"B": 2, "P": 2}) and plain.tool_runs["pay_P"] == 1
    approving = await run_approving(tree, False, [], 1)  # pausing a second time would raise here
    check(approving, reference, trace, stop, "run approved and resumed")


async def test_parallel_error_closes_the_streams_it_drops() -> None:
    """An error stops a Parallel: the events its other children produced in the same step are dropped, and their
    message streams must be closed. ``par[failing, streaming]``: ``failing`` reports its error at once,
    ``streaming`` yields a streaming message a few scheduler turns later, in the same step; the Parallel
    returns on the error and the streaming event is dropped with its stream open (garbage-collected open)."""

    class Failing:
        name, description = "failing", "fails"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
            yield AgentEvent(error=RuntimeError("boom"))

    class Streaming:
        name, description = "streaming", "streams"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            reader = StreamReader.from_iterable([assistant_message("hel"), assistant_message("lo")])
            yield AgentEvent(output=AgentOutput(MessageVariant(True, None, reader)))

    stream._reset_leak_tracking()
    try:
        events = []
        runner = Runner(ParallelAgent("par", "d", [Failing(), Streaming()]), enable_streaming=True)
        async with runner.query("go") as run:
            async for event in run:
                events.append(event)
        assert [str(e.error) for e in events] == ["boom"] and run.termination_reason == "error"
        gc.collect()
        assert stream._open_reader_report() == []
    finally:
        stream._reset_leak_tracking()


async def test_a_workflow_stopped_while_holding_events_closes_their_streams() -> None:
    """A Sequential or Loop holds an event with an action until the next one arrives, then hands the held one on
    with the new one still in hand. Stopped right there (a Parallel sibling failed), it must close the stream
    of the event it still holds. ``par[loop[breaker], failing]``, found as ``seq[par[loop[break, break],
    seq[answer, fail]]]`` streaming: ``breaker``'s streaming message was garbage-collected open."""

    class Breaker:
        name, description = "breaker", "acts, then streams"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
            yield AgentEvent(action=AgentAction(customized={"note": 1}))  # an action: held by the loop
            reader = StreamReader.from_iterable([assistant_message("hel"), assistant_message("lo")])
            yield AgentEvent(output=AgentOutput(MessageVariant(True, None, reader)))

    class Failing:
        name, description = "failing", "fails"

        async def run(self, input: AgentInput, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
            yield AgentEvent(error=RuntimeError("boom"))

    stream._reset_leak_tracking()
    try:
        tree = ParallelAgent("par", "d", [LoopAgent("loop", "d", [Breaker()], max_iterations=1), Failing()])
        async with Runner(tree, enable_streaming=True).query("go") as run:
            events = [e async for e in run]
        assert "boom" in [str(e.error) for e in events] and run.termination_reason == "error"
        gc.collect()
        assert stream._open_reader_report() == []
    finally:
        stream._reset_leak_tracking()
