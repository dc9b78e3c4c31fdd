"""Leak checks, scripted chat runs and hypothesis strategies (see ``compose.testing``)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from compose.errors import ModelServerError
from compose.graph.builder import END, START
from compose.models.scripted import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, assistant_message
from compose.testing._spec import MODES, RULES, WINDOW, BranchSpec, GraphSpec, Mode, NodeSpec, Rule

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

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

    tracking = stream._set_leak_tracking(True)
    try:
        before_readers = Counter(stream._open_reader_report())
        before_tasks = {t.id for t in anyio.get_running_tasks()}
        yield
        await anyio.wait_all_tasks_blocked()
    finally:
        stream._set_leak_tracking(tracking)
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
