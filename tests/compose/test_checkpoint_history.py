"""Checkpoint history (``compile(keep_history=...)``): step numbering in Pregel and DAG mode, replay and fork from
any step, ``update_state``, pauses in the history, ``resume_all``, retention, every store, a process restart."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from compose.checkpoint import (
    CheckpointError,
    CheckpointExistsError,
    CheckpointNotFoundError,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
    prune,
)
from compose.errors import GraphBuildError, GraphInterrupt, GraphRunError, StateUpdateError
from compose.graph import END, START, Graph
from compose.interrupt import get_resume_context, interrupt
from compose.state import process_state
from compose.stream import StreamReader, concat
from tests.compose.workers.history_worker import build as restart_graph
from tests.stores import STORE_KINDS, checkpoint_store, drop_checkpoint_table

pytestmark = pytest.mark.anyio

PARADIGMS = ("invoke", "stream", "collect", "transform")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Log:
    seen: list[str] = field(default_factory=list)


async def run(r: Any, paradigm: str, x: Any, **opts: Any) -> Any:
    if paradigm == "invoke":
        return await r.invoke(x, **opts)
    if paradigm == "stream":
        return await concat(await r.stream(x, **opts))
    if paradigm == "collect":
        return await r.collect(StreamReader.from_iterable([x]), **opts)
    return await concat(await r.transform(StreamReader.from_iterable([x]), **opts))


def tagger(key: str, ran: list[str]) -> Any:
    async def node(x: str) -> str:
        ran.append(key)
        async with process_state(Log) as st:
            st.seen.append(key)
        return x + key[-1]

    return node


def line(n: int, ran: list[str], **compile_opts: Any) -> Any:
    """START -> n1 -> ... -> n<n> -> END (Pregel: n steps), with a state."""
    g = Graph[str, str](state=Log)
    prev = START
    for i in range(1, n + 1):
        g.add_lambda_node(f"n{i}", tagger(f"n{i}", ran))
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    compile_opts.setdefault("checkpoint_store", InMemoryCheckPointStore())
    compile_opts.setdefault("keep_history", True)
    return g.compile(name="line", **compile_opts)


def loop(ran: list[str]) -> Any:
    """START -> a -> b, b back to a until the text has 7 characters (Pregel: 6 steps)."""
    from compose.graph.branch import GraphBranch

    g = Graph[str, str](state=Log)
    g.add_lambda_node("a", tagger("a", ran))
    g.add_lambda_node("b", tagger("b", ran))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_branch("b", GraphBranch(lambda x: END if len(x) >= 7 else "a", {"a", END}))
    return g.compile(name="loop", checkpoint_store=InMemoryCheckPointStore(), keep_history=True)


def diamond(ran: list[str], **compile_opts: Any) -> Any:
    """DAG: START -> a -> (b, c) -> d -> e -> END; c is slower than b (it passes through the event loop)."""
    g = Graph[str, str](state=Log)

    async def slow(x: str) -> str:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        ran.append("c")
        return x + "c"

    async def join(d: dict[str, Any]) -> str:
        ran.append("d")
        return f"{d['b']}|{d['c']}"

    g.add_lambda_node("a", tagger("a", ran))
    g.add_lambda_node("b", tagger("b", ran), output_key="b")
    g.add_lambda_node("c", slow, output_key="c")
    g.add_lambda_node("d", join)
    g.add_lambda_node("e", tagger("e", ran))
    for s, e in [(START, "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"), ("e", END)]:
        g.add_edge(s, e)
    compile_opts.setdefault("checkpoint_store", InMemoryCheckPointStore())
    return g.compile(name="diamond", trigger_mode="all_predecessor", keep_history=True, **compile_opts)


# ---------------------------------------------------------------------------------------------------------------
# Numbering


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_pregel_loop_history_has_a_snapshot_per_superstep(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = loop(ran)
    assert await run(r, paradigm, ">", checkpoint_id="k") == ">ababab"
    history = await r.get_state_history("k")
    assert [s.step for s in history] == [6, 5, 4, 3, 2, 1, 0]  # newest first
    assert {s.branch for s in history} == {"main"}
    assert [s.parent for s in reversed(history)] == [None] + [("main", i) for i in range(6)]
    assert [s.next_nodes for s in reversed(history)] == [("a",), ("b",), ("a",), ("b",), ("a",), ("b",), ()]
    assert [s.node_outputs for s in reversed(history)][:3] == [{}, {"a": ">a"}, {"b": ">ab"}]
    final = history[0]
    assert final.final and final.output == ">ababab" and final.state == {"seen": list("ababab")}
    assert history[-1].state == {"seen": []}  # step 0: before any node ran
    assert history[3].state == {"seen": ["a", "b", "a"]}
    assert all(s.created_at.tzinfo is dt.UTC for s in history)


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_dag_history_has_a_snapshot_per_completed_node(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = diamond(ran)
    assert await run(r, paradigm, ">", checkpoint_id="k") == ">ab|>ac" + "e"
    history = list(reversed(await r.get_state_history("k")))
    assert [s.step for s in history] == [0, 1, 2, 3, 4, 5]
    assert history[0].next_nodes == ("a",) and history[1].next_nodes == ("b", "c")
    assert [next(iter(s.node_outputs)) for s in history[1:]] == ["a", "b", "c", "d", "e"]
    # c was still running when b's completion was recorded: it is among the next nodes, to be re-run from there
    assert "c" in history[2].next_nodes
    assert history[-1].final and history[-1].next_nodes == () and history[-1].output == ">ab|>ace"


async def test_without_keep_history_or_checkpoint_id_nothing_is_kept(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    ran: list[str] = []
    assert await line(3, ran, checkpoint_store=store).invoke(">") == ">123"
    assert await store.list() == []
    g = Graph[str, str](state=Log)
    g.add_lambda_node("a", tagger("a", ran))
    g.add_edge(START, "a")
    g.add_edge("a", END)
    plain = g.compile(checkpoint_store=store)
    assert await plain.invoke(">", checkpoint_id="k") == ">a"
    assert await store.list() == []  # Eino's semantics: a checkpoint only for a pause
    with pytest.raises(GraphRunError, match="keep_history"):
        await plain.invoke(None, checkpoint_id="k", from_step=0)
    with pytest.raises(TypeError, match="needs checkpoint_id="):
        await plain.invoke(None, from_step=0)
    with pytest.raises(TypeError, match="need from_step="):
        await plain.invoke(None, checkpoint_id="k", fork_id="x")


# ---------------------------------------------------------------------------------------------------------------
# Replay and fork


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_replay_from_every_step_of_a_5_step_run_reproduces_the_output(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = line(5, ran)
    original = await run(r, paradigm, ">", checkpoint_id="k")
    assert original == ">12345"
    for step in range(6):
        ran.clear()
        assert await run(r, paradigm, None, checkpoint_id="k", from_step=step) == original
        assert ran == [f"n{i}" for i in range(step + 1, 6)]  # only the nodes after that step ran again
    history = await r.get_state_history("k")
    replays = [s for s in history if s.branch != "main"]
    # each replay is a branch of its own whose first snapshot points to the step it continued from
    firsts: dict[str, Any] = {}
    for s in replays:
        firsts.setdefault(s.branch, s)  # newest first: the last seen is the branch's first snapshot
        firsts[s.branch] = s
    assert sorted(s.parent for s in firsts.values() if s.parent is not None) == [("main", i) for i in range(5)]
    assert len([s for s in history if s.branch == "main"]) == 6  # the original snapshots stay as they were


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_dag_replay_from_every_step_reproduces_the_output(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = diamond(ran)
    original = await run(r, paradigm, ">", checkpoint_id="k")
    for step in range(6):
        ran.clear()
        assert await run(r, paradigm, None, checkpoint_id="k", from_step=step) == original
    ran.clear()
    await run(r, paradigm, None, checkpoint_id="k", from_step=5)
    assert ran == []  # the final snapshot: its output, no node runs


async def test_fork_copies_the_prefix_under_a_new_id(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(5, ran)
    await r.invoke(">", checkpoint_id="k")
    ran.clear()
    assert await r.invoke(None, checkpoint_id="k", from_step=2, fork_id="other") == ">12345"
    assert ran == ["n3", "n4", "n5"]
    forked = list(reversed(await r.get_state_history("other")))
    assert [(s.branch, s.step) for s in forked] == [("main", i) for i in range(6)]
    assert all(s.checkpoint_id == "other" for s in forked)
    assert forked[3].parent == ("main", 2)
    assert len(await r.get_state_history("k")) == 6  # the original is untouched


async def test_a_fork_into_an_id_in_use_is_refused_and_writes_nothing(anyio_backend: Any) -> None:
    ran: list[str] = []
    store = InMemoryCheckPointStore()
    r = line(3, ran, checkpoint_store=store)
    await r.invoke(">", checkpoint_id="k")
    await r.invoke("<", checkpoint_id="taken")
    before = {key: await store.get(key) for key in await store.list()}
    with pytest.raises(CheckpointExistsError, match=r"fork_id='taken'.*a history \(4 snapshot") as refused:
        await r.invoke(None, checkpoint_id="k", from_step=1, fork_id="taken")
    assert (refused.value.reason, refused.value.checkpoint_id, refused.value.fork_id) == ("exists", "k", "taken")
    with pytest.raises(CheckpointExistsError, match="fork_id='k'"):  # into itself
        await r.invoke(None, checkpoint_id="k", from_step=1, fork_id="k")
    with pytest.raises(CheckpointExistsError, match="fork_id='taken'"):
        await r.update_state("k", 1, as_node="n2", output="X", fork_id="taken")
    g = Graph[str, str](state=Log)  # a paused run without history: its live checkpoint only
    g.add_lambda_node("a", tagger("a", ran))
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(GraphInterrupt):
        await g.compile(checkpoint_store=store, interrupt_before=["a"]).invoke(">", checkpoint_id="live")
    assert await store.get("live") is not None and not await r.get_state_history("live")
    before["live"] = await store.get("live")
    with pytest.raises(CheckpointExistsError, match="a saved checkpoint"):
        await r.invoke(None, checkpoint_id="k", from_step=1, fork_id="live")
    assert {key: await store.get(key) for key in await store.list()} == before  # nothing written or changed
    assert [s.output for s in await r.get_state_history("taken") if s.final] == ["<123"]


async def test_a_fork_with_keep_history_n_never_prunes_the_original(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(5, ran, keep_history=3)
    await r.invoke(">", checkpoint_id="k")
    assert [s.step for s in await r.get_state_history("k")] == [5, 4, 3]
    assert await r.invoke(None, checkpoint_id="k", from_step=3, fork_id="f") == ">12345"
    assert [s.step for s in await r.get_state_history("k")] == [5, 4, 3]  # the original's records are its own
    assert [s.step for s in await r.get_state_history("f")] == [5, 4, 3]


async def test_get_state(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(3, ran)
    await r.invoke(">", checkpoint_id="k")
    latest = await r.get_state("k")
    assert latest is not None and latest.final and latest.step == 3
    one = await r.get_state("k", step=1)
    assert one is not None and one.node_outputs == {"n1": ">1"} and one.next_nodes == ("n2",)
    assert await r.get_state("nothing") is None
    with pytest.raises(CheckpointNotFoundError, match="history step 9"):
        await r.get_state("k", step=9)


# ---------------------------------------------------------------------------------------------------------------
# Editing


async def test_update_state_changes_the_outcome_as_computed_by_hand(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(3, ran)
    assert await r.invoke(">", checkpoint_id="k") == ">123"
    # after step 1 (n1 ran, n2 next): n2 "produced" "X" and the state is patched
    snap = await r.update_state("k", 1, as_node="n2", output="X", state={"seen": ["edited"]})
    assert snap.step == 2 and snap.branch != "main" and snap.parent == ("main", 1)
    assert snap.next_nodes == ("n3",) and snap.node_outputs == {"n2": "X"} and snap.state == {"seen": ["edited"]}
    ran.clear()
    assert await r.invoke(None, checkpoint_id="k", from_step=2, branch=snap.branch) == "X3"
    assert ran == ["n3"]
    final = await r.get_state("k", branch=snap.branch)
    assert final is not None and final.final and final.state == {"seen": ["edited", "n3"]}
    main = await r.get_state("k", step=3)
    assert main is not None and main.output == ">123"  # the original branch is unchanged


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_update_state_in_a_dag(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = diamond(ran)
    await run(r, paradigm, ">", checkpoint_id="k")
    snap = await r.update_state("k", 1, as_node="b", output={"b": "B"})
    assert snap.next_nodes == ("c",)
    ran.clear()
    assert await run(r, paradigm, None, checkpoint_id="k", from_step=2, branch=snap.branch) == "B|>ace"
    assert sorted(ran) == ["c", "d", "e"]


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_an_edit_routed_to_end_is_the_final_snapshot_and_continuing_writes_nothing(
    anyio_backend: Any, mode: str
) -> None:
    ran: list[str] = []
    if mode == "all_predecessor":
        r = diamond(ran)
        await r.invoke(">", checkpoint_id="k")
        edit = await r.update_state("k", 4, as_node="e", output="edited", state={"seen": ["x"]})
    else:
        r = line(3, ran)
        await r.invoke(">", checkpoint_id="k")
        edit = await r.update_state("k", 2, as_node="n3", output="edited", state={"seen": ["x"]})
    assert edit.final and edit.next_nodes == () and edit.output == "edited" and edit.state == {"seen": ["x"]}
    assert edit.node_outputs == ({"e": "edited"} if mode == "all_predecessor" else {"n3": "edited"})
    before = await r.get_state_history("k")
    ran.clear()
    for _ in range(2):
        assert await r.invoke(None, checkpoint_id="k", from_step=edit.step, branch=edit.branch) == "edited"
        assert await concat(await r.stream(None, checkpoint_id="k", from_step=edit.step, branch=edit.branch)) == (
            "edited"
        )
    assert ran == []  # no node ran
    assert await r.get_state_history("k") == before  # and nothing more was written


async def test_update_state_under_a_fork_id(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(3, ran)
    await r.invoke(">", checkpoint_id="k")
    snap = await r.update_state("k", 0, as_node="n1", output="!", fork_id="edited")
    assert (snap.checkpoint_id, snap.branch, snap.step) == ("edited", "main", 1)
    assert await r.invoke(None, checkpoint_id="edited", from_step=1) == "!23"


async def test_update_state_errors_name_what_is_wrong(anyio_backend: Any) -> None:
    ran: list[str] = []
    r = line(3, ran)
    await r.invoke(">", checkpoint_id="k")
    with pytest.raises(StateUpdateError, match="has no node 'zz'"):
        await r.update_state("k", 1, as_node="zz", output="x")
    with pytest.raises(StateUpdateError, match=r"node 'n3' does not run after step 1 .*\['n2'\]"):
        await r.update_state("k", 1, as_node="n3", output="x")
    with pytest.raises(StateUpdateError, match="output of node 'n2' must be a str, got int"):
        await r.update_state("k", 1, as_node="n2", output=3)
    with pytest.raises(StateUpdateError, match=r"no field\(s\) \['nope'\]"):
        await r.update_state("k", 1, as_node="n2", output="x", state={"nope": 1})
    with pytest.raises(StateUpdateError, match="seen"):
        await r.update_state("k", 1, as_node="n2", output="x", state={"seen": 5})
    with pytest.raises(StateUpdateError, match=r"state= must be a mapping .* got list"):
        await r.update_state("k", 1, as_node="n2", output="x", state=["seen"])  # type: ignore[arg-type]
    with pytest.raises(StateUpdateError, match=r"state= must be a mapping .* got the key\(s\) \[1\]"):
        await r.update_state("k", 1, as_node="n2", output="x", state={1: []})  # type: ignore[dict-item]
    with pytest.raises(CheckpointNotFoundError, match="history step 7"):
        await r.update_state("k", 7, as_node="n2", output="x")
    assert {s.branch for s in await r.get_state_history("k")} == {"main"}  # nothing was written


async def test_keep_history_needs_a_store() -> None:
    g = Graph[str, str](state=Log)
    g.add_lambda_node("a", tagger("a", []))
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(GraphBuildError, match="keep_history needs a checkpoint_store"):
        g.compile(keep_history=True)
    with pytest.raises(GraphBuildError, match="count >= 1"):
        g.compile(keep_history=0, checkpoint_store=InMemoryCheckPointStore())

    class GetSet:
        async def get(self, checkpoint_id: str) -> bytes | None:
            return None

        async def set(self, checkpoint_id: str, data: bytes) -> None:
            pass

    with pytest.raises(GraphBuildError, match=r"GetSet needs list\(\) and delete\(\)"):
        g.compile(keep_history=3, checkpoint_store=GetSet())
    g.compile(keep_history=True, checkpoint_store=GetSet())  # writing needs set() only


# ---------------------------------------------------------------------------------------------------------------
# Pauses, resume_all, sub-graphs


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_a_pause_is_a_snapshot_with_its_interrupts_and_the_resume_continues_its_lineage(
    anyio_backend: Any, mode: str
) -> None:
    ran: list[str] = []
    if mode == "all_predecessor":
        r = diamond(ran, interrupt_before=["d"])
        last = 5
    else:
        r = line(3, ran, interrupt_before=["n2"])
        last = 3
    with pytest.raises(GraphInterrupt):
        await r.invoke(">", checkpoint_id="k")
    paused = await r.get_state("k")
    assert paused is not None and paused.interrupts and not paused.final
    assert paused.next_nodes == (("d",) if mode == "all_predecessor" else ("n2",))
    out = await r.invoke(None, checkpoint_id="k")
    history = list(reversed(await r.get_state_history("k")))
    assert [s.step for s in history] == list(range(last + 1))
    assert {s.branch for s in history} == {"main"}
    assert history[-1].final and history[-1].output == out
    assert [s for s in history if s.interrupts] == [paused]
    # replaying the paused step resumes it (the interrupt does not fire again for the restored nodes)
    assert await r.invoke(None, checkpoint_id="k", from_step=paused.step) == out


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_a_pause_before_a_node_keeps_what_the_step_that_ended_produced(
    anyio_backend: Any, mode: str, paradigm: str
) -> None:
    ran: list[str] = []
    if mode == "all_predecessor":
        r = diamond(ran, interrupt_before=["d"])
        produced = {"c": {"c": ">ac"}}  # the completion the pause came after (b's is the step before)
    else:
        r = line(3, ran, interrupt_before=["n2"])
        produced = {"n1": ">1"}
    with pytest.raises(GraphInterrupt):
        await run(r, paradigm, ">", checkpoint_id="k")
    paused = await r.get_state("k")
    assert paused is not None and paused.interrupts
    assert paused.node_outputs == produced
    await run(r, paradigm, None, checkpoint_id="k")
    history = list(reversed(await r.get_state_history("k")))
    merged = {k: v for s in history for k, v in s.node_outputs.items()}
    assert set(merged) == ({"a", "b", "c", "d", "e"} if mode == "all_predecessor" else {"n1", "n2", "n3"})


async def test_resume_all_answers_every_open_interrupt(anyio_backend: Any) -> None:
    answers: list[Any] = []

    def asking(key: str) -> Any:
        async def node(x: str) -> dict[str, str]:
            ctx = get_resume_context()
            if not ctx.is_target:
                raise interrupt(f"approve {key}?")
            answers.append((key, ctx.data))
            return {key: x + key}

        return node

    g = Graph[str, dict[str, str]]()
    for key in ("x", "y"):
        g.add_lambda_node(key, asking(key))
        g.add_edge(START, key)
        g.add_edge(key, END)
    r = g.compile(checkpoint_store=InMemoryCheckPointStore())
    with pytest.raises(GraphInterrupt) as paused:
        await r.invoke(">", checkpoint_id="k")
    assert len(paused.value.info.interrupt_contexts) == 2
    assert await r.invoke(None, checkpoint_id="k", resume_all="yes") == {"x": "x", "y": "y"}
    assert sorted(answers) == [("x", "yes"), ("y", "yes")]


def nested(ran: list[str], store: Any) -> Any:
    """Top: START -> pre -> outer -> post -> END; outer: START -> inner -> END; inner: START -> deep -> END."""
    deepest = Graph[str, str]()
    deepest.add_lambda_node("deep", tagger("deep", ran))
    deepest.add_edge(START, "deep")
    deepest.add_edge("deep", END)
    middle = Graph[str, str]()
    middle.add_graph_node("inner", deepest)
    middle.add_lambda_node("m", tagger("m", ran))
    middle.add_edge(START, "inner")
    middle.add_edge("inner", "m")
    middle.add_edge("m", END)
    top = Graph[str, str](state=Log)
    top.add_lambda_node("pre", tagger("pre", ran))
    top.add_graph_node("outer", middle)
    top.add_lambda_node("post", tagger("post", ran))
    for s, e in [(START, "pre"), ("pre", "outer"), ("outer", "post"), ("post", END)]:
        top.add_edge(s, e)
    return top.compile(name="top", checkpoint_store=store, keep_history=True)


@pytest.mark.parametrize("paradigm", PARADIGMS)
async def test_sub_graphs_two_levels_deep_replay_from_every_step(anyio_backend: Any, paradigm: str) -> None:
    ran: list[str] = []
    r = nested(ran, InMemoryCheckPointStore())
    out = await run(r, paradigm, ">", checkpoint_id="k")
    assert out == ">epmt"
    history = list(reversed(await r.get_state_history("k")))
    assert [s.step for s in history] == [0, 1, 2, 3]
    assert history[2].node_outputs == {"outer": ">epm"}
    for step in range(4):
        ran.clear()
        assert await run(r, paradigm, None, checkpoint_id="k", from_step=step) == out
    ran.clear()
    await r.invoke(None, checkpoint_id="k", from_step=1)
    assert ran == ["deep", "m", "post"]


# ---------------------------------------------------------------------------------------------------------------
# Retention and stores


async def test_keep_history_n_keeps_the_last_n(anyio_backend: Any) -> None:
    ran: list[str] = []
    store = InMemoryCheckPointStore()
    r = line(5, ran, checkpoint_store=store)
    g_n = line(5, ran, checkpoint_store=store)
    del g_n
    await r.invoke(">", checkpoint_id="all")
    assert len(await r.get_state_history("all")) == 6
    kept = Graph[str, str](state=Log)
    prev = START
    for i in range(1, 6):
        kept.add_lambda_node(f"n{i}", tagger(f"n{i}", ran))
        kept.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    kept.add_edge(prev, END)
    r3 = kept.compile(name="line", checkpoint_store=store, keep_history=3)
    await r3.invoke(">", checkpoint_id="three")
    assert [s.step for s in await r3.get_state_history("three")] == [5, 4, 3]


async def test_prune_older_than_removes_whole_histories(anyio_backend: Any) -> None:
    ran: list[str] = []
    store = InMemoryCheckPointStore()
    r = line(2, ran, checkpoint_store=store, interrupt_before=["n2"])
    with pytest.raises(GraphInterrupt):
        await r.invoke(">", checkpoint_id="old")
    assert await prune(store, older_than=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)) == 0
    assert len(await r.get_state_history("old")) == 2
    deleted = await prune(store, older_than=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))
    assert deleted == 3  # the live checkpoint of the pause and both snapshots
    assert await store.list() == []


@pytest.fixture(params=STORE_KINDS)
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    async with checkpoint_store(request, tmp_path, max_size=2) as s:
        yield s


async def test_history_on_every_store(anyio_backend: Any, any_store: Any) -> None:
    ran: list[str] = []
    r = line(3, ran, checkpoint_store=any_store)
    await r.invoke(">", checkpoint_id="a/b c")  # any id: keys are quoted
    snap = await r.update_state("a/b c", 1, as_node="n2", output="Q")
    assert await r.invoke(None, checkpoint_id="a/b c", from_step=2, branch=snap.branch) == "Q3"
    history = await r.get_state_history("a/b c")
    assert len(history) == 4 + 2 and history[0].branch == snap.branch


@pytest.mark.slow  # a worker process
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_history_survives_a_process_restart(anyio_backend: Any, kind: str, tmp_path: Path) -> None:
    table = f"restart_{os.getpid()}"
    if kind == "sqlite":
        where = str(tmp_path / "history.db")
    else:
        pytest.importorskip("psycopg")
        where = os.environ.get("PYEINO_TEST_PG_DSN") or ""
        if not where:
            pytest.skip("no PostgreSQL server (PYEINO_TEST_PG_DSN)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = ROOT / "tests" / "compose" / "workers" / "history_worker.py"
    done = await anyio.run_process([sys.executable, str(worker), kind, where, table], env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == '">12345"'
    store: Any = SQLiteCheckPointStore(where) if kind == "sqlite" else PostgresCheckPointStore(where, table=table)
    try:
        async with store:
            r = restart_graph(store)
            history = await r.get_state_history("run-1")
            assert [s.step for s in history] == [5, 4, 3, 2, 1, 0]
            assert history[2].state == {"seen": ["n1", "n2", "n3"]}
            assert await r.invoke(None, checkpoint_id="run-1", from_step=3) == ">12345"
    finally:
        if kind == "postgres":
            await anyio.to_thread.run_sync(drop_checkpoint_table, where, table)


async def test_a_record_from_another_graph_is_refused(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    ran: list[str] = []
    await line(3, ran, checkpoint_store=store).invoke(">", checkpoint_id="k")
    other = line(4, ran, checkpoint_store=store)
    with pytest.raises(CheckpointError, match=r"written by a different graph|fingerprint"):
        await other.invoke(None, checkpoint_id="k", from_step=1)


_ = subprocess  # the restart test runs its worker through anyio.run_process


async def test_snapshots_are_signed_like_checkpoints(anyio_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from compose.checkpoint import CHECKPOINT_KEY_ENV

    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "secret-1")
    store = InMemoryCheckPointStore()
    ran: list[str] = []
    r = line(2, ran, checkpoint_store=store)
    await r.invoke(">", checkpoint_id="k")
    assert len(await r.get_state_history("k")) == 3
    key = (await store.list())[0]
    data = await store.get(key)
    assert data is not None and b'"digest":"hmac-sha256:' in data.split(b"\n", 1)[0]
    assert b'"state"' in data and b"pickle" not in data  # JSON
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "another key")
    with pytest.raises(CheckpointError) as wrong:
        await r.get_state_history("k")
    assert wrong.value.reason == "digest"
    with pytest.raises(CheckpointError):
        await r.invoke(None, checkpoint_id="k", from_step=1)


async def test_a_failing_stream_node_in_a_recorded_run_names_the_node(anyio_backend: Any) -> None:
    from compose.errors import NodeRunError

    async def broken(x: str) -> Any:
        yield x
        raise ValueError("half way")

    async def ok(x: str) -> str:
        return x + "o"

    g = Graph[str, str]()
    g.add_lambda_node("ok", ok)
    g.add_lambda_node("broken", broken)
    g.add_edge(START, "ok")
    g.add_edge("ok", "broken")
    g.add_edge("broken", END)
    r = g.compile(checkpoint_store=InMemoryCheckPointStore(), keep_history=True)
    with pytest.raises(NodeRunError) as failed:
        await concat(await r.stream(">", checkpoint_id="k"))
    assert failed.value.node_path == ["broken"]
    assert [s.step for s in await r.get_state_history("k")] == [1, 0]  # what ran before the failure


async def test_a_cancelled_recorded_run_leaves_nothing_open(anyio_backend: Any) -> None:
    started = anyio.Event()

    async def slow(x: str) -> str:
        started.set()
        await anyio.sleep_forever()
        return x

    g = Graph[str, str](state=Log)
    g.add_lambda_node("a", tagger("a", []))
    g.add_lambda_node("slow", slow)
    g.add_edge(START, "a")
    g.add_edge("a", "slow")
    g.add_edge("slow", END)
    r = g.compile(checkpoint_store=InMemoryCheckPointStore(), keep_history=True)
    async def consume() -> None:
        await concat(await r.stream(">", checkpoint_id="k"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await started.wait()
        tg.cancel_scope.cancel()
    assert [s.step for s in await r.get_state_history("k")] == [1, 0]
