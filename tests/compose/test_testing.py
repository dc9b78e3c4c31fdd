"""compose.testing: the reference interpreter on hand-written specs, the strategies, to_python and the leak check."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest
from hypothesis import given, settings

from compose.errors import FanInMergeError, GraphRunError, MaxStepsExceededError, ModelServerError, NodeRunError
from compose.graph import END, START
from compose.schema import user_message
from compose.stream import StreamReader, StreamWriter, concat, pipe
from compose.testing import (
    BranchSpec,
    ChatScript,
    GraphSpec,
    NodeSpec,
    ScriptedChatModel,
    assert_no_leaks,
    build,
    chat_scripts,
    flat,
    graphs,
    reference_run,
    reference_trace,
    same_outcome,
)

pytestmark = pytest.mark.anyio

X = {"in": "x"}


def chain(*tags: str, mode: Any = "any_predecessor", max_run_steps: int | None = None) -> GraphSpec:
    keys = [f"n{i}" for i in range(len(tags))]
    nodes = tuple(NodeSpec(k, tag=t) for k, t in zip(keys, tags, strict=True))
    edges = tuple(zip([START, *keys], [*keys, END], strict=True))
    return GraphSpec(mode, nodes, edges, max_run_steps=max_run_steps)


def test_flat_reads_dicts_in_key_order() -> None:
    assert flat({"b": "2", "a": {"z": "1", "y": "0"}}) == "012"
    assert flat("s") == "s"


def test_reference_chain_counts_steps_from_zero_without_start() -> None:
    trace = reference_trace(chain("a", "b"), X)
    assert trace.output == {"n1": "xab"}
    assert trace.steps == 2
    assert trace.executed == ["n0", "n1"]
    assert reference_run(chain("a", "b"), X, max_run_steps=2) == {"n1": "xab"}
    with pytest.raises(MaxStepsExceededError):
        reference_run(chain("a", "b"), X, max_run_steps=1)
    with pytest.raises(MaxStepsExceededError):
        reference_run(chain("a", "b", max_run_steps=1), X)


def test_reference_pregel_end_first_wins() -> None:
    spec = GraphSpec(
        "any_predecessor",
        (NodeSpec("n0", tag="1"), NodeSpec("n1", tag="2")),
        ((START, "n0"), ("n0", END), ("n0", "n1"), ("n1", END)),
    )
    trace = reference_trace(spec, X)
    assert trace.output == {"n0": "x1"}
    assert trace.executed == ["n0"]


def test_reference_bounded_loop_and_default_step_limit() -> None:
    def loop(threshold: int) -> GraphSpec:
        return GraphSpec(
            "any_predecessor",
            (NodeSpec("n0", tag="a"),),
            ((START, "n0"),),
            (BranchSpec("n0", ("n0", END), "length", threshold=threshold),),
        )

    # "x" + "a" per pass: the text reaches length 12 after 11 passes = 11 steps <= 1 + 10
    assert reference_trace(loop(12), X).output == {"n0": "x" + "a" * 11}
    assert reference_trace(loop(12), X).steps == 11
    assert isinstance(reference_trace(loop(13), X).error, MaxStepsExceededError)


def test_reference_pregel_fan_in_same_step_merges_different_steps_run_twice() -> None:
    spec = GraphSpec(
        "any_predecessor",
        (NodeSpec("a", tag="a"), NodeSpec("b", tag="b"), NodeSpec("b2", tag="c"), NodeSpec("j", tag="j")),
        ((START, "a"), (START, "b"), ("b", "b2"), ("a", "j"), ("b2", "j"), ("b", "j"), ("j", END)),
    )
    trace = reference_trace(spec, X)
    # step 0: a, b; step 1: j({a, b}) and b2; END wins with j's first output
    assert trace.output == {"j": "xaxbj"}
    assert trace.executed == ["a", "b", "b2", "j"]


def test_reference_dag_skip_propagation() -> None:
    # START -> n0 -branch-> {n1, n2}; n1 -> n3 -> END; n2 -> END; n3 is skipped with n1
    branch = BranchSpec("n0", ("n1", "n2"), "hash")
    chosen = branch.choose("xa")
    spec = GraphSpec(
        "all_predecessor",
        tuple(NodeSpec(k, tag=t) for k, t in (("n0", "a"), ("n1", "b"), ("n2", "c"), ("n3", "d"))),
        ((START, "n0"), ("n1", "n3"), ("n3", END), ("n2", END)),
        (branch,),
    )
    trace = reference_trace(spec, X)
    if chosen == {"n2"}:
        assert trace.skipped == {"n1", "n3"}
        assert trace.output == {"n2": "xac"}
    else:
        assert trace.skipped == {"n2"}
        assert trace.output == {"n3": "xabd"}


def test_reference_dag_waits_for_all_and_merges() -> None:
    spec = GraphSpec(
        "all_predecessor",
        (NodeSpec("a", tag="a"), NodeSpec("b", tag="b"), NodeSpec("b2", tag="c"), NodeSpec("j", tag="j")),
        ((START, "a"), (START, "b"), ("b", "b2"), ("a", "j"), ("b2", "j"), ("j", END)),
    )
    assert reference_run(spec, X) == {"j": "xaxbcj"}


def test_reference_errors() -> None:
    empty = GraphSpec(
        "all_predecessor",
        (NodeSpec("n0"), NodeSpec("n1")),
        ((START, "n0"), ("n1", END)),
        (BranchSpec("n0", ("n1",), "first", multi=True),),  # ord("x") & 1 == 0: chooses nothing
    )
    with pytest.raises(GraphRunError, match="no tasks to execute"):
        reference_run(empty, X)
    clash = GraphSpec(
        "any_predecessor",
        (NodeSpec("a", output_key="k"), NodeSpec("b", output_key="k")),
        ((START, "a"), (START, "b"), ("a", END), ("b", END)),
    )
    with pytest.raises(FanInMergeError, match=r"duplicated key \('k'\)"):
        reference_run(clash, X)
    inner = GraphSpec("all_predecessor", (NodeSpec("s_n0", fails_on="x"),), ((START, "s_n0"), ("s_n0", END)))
    outer = GraphSpec("any_predecessor", (NodeSpec("s", sub=inner),), ((START, "s"), ("s", END)))
    with pytest.raises(NodeRunError) as info:
        reference_run(outer, X)
    assert info.value.node_path == ["s", "s_n0"]
    assert isinstance(info.value.__cause__, ValueError)


def test_reference_allows_every_failure_of_one_step() -> None:
    # a and b run in the same superstep and both fail: the engine may report either
    spec = GraphSpec(
        "any_predecessor",
        (NodeSpec("a", fails_on="x"), NodeSpec("b", fails_on="x")),
        ((START, "a"), (START, "b"), ("a", END), ("b", END)),
    )
    trace = reference_trace(spec, X)
    assert [e.node_path for e in trace.errors if isinstance(e, NodeRunError)] == [["a"], ["b"]]
    assert same_outcome(NodeRunError(["b"], ValueError("node b fails on 'x'")), trace)
    assert not same_outcome(NodeRunError(["c"], ValueError("boom")), trace)
    assert not same_outcome(None, trace)


def test_reference_records_skips_only_of_graphs_that_run_once() -> None:
    inner = GraphSpec(
        "all_predecessor",
        (NodeSpec("s_a"), NodeSpec("s_b")),
        ((START, "s_a"), ("s_a", END), ("s_b", END)),
        (BranchSpec(START, ("s_b",), "first", multi=True),),  # ord("x") & 1 == 0: s_b is skipped
    )
    once = GraphSpec("all_predecessor", (NodeSpec("s", sub=inner),), ((START, "s"), ("s", END)))
    assert reference_trace(once, X).skipped == {"s_b"}
    looped = GraphSpec(
        "any_predecessor",
        (NodeSpec("s", sub=inner),),
        ((START, "s"),),
        (BranchSpec("s", ("s", END), "length", threshold=4),),
    )
    assert reference_trace(looped, X).skipped == set()


async def test_engine_agrees_on_hand_written_specs() -> None:
    specs = [
        chain("a", "b"),
        chain("a", "b", mode="all_predecessor"),
        GraphSpec(
            "any_predecessor",
            (NodeSpec("n0", tag="ab", chunks=3),),
            ((START, "n0"),),
            (BranchSpec("n0", ("n0", END), "length", stream=True, threshold=9),),
        ),
    ]
    for spec in specs:
        runnable = build(spec).compile(**spec.compile_options())
        expected = reference_run(spec, X)
        assert await runnable.invoke(X) == expected
        assert await concat(await runnable.stream(X)) == expected
    assert expected == {"n0": "xabababab"}


async def test_to_python_builds_the_same_graph() -> None:
    inner = GraphSpec("all_predecessor", (NodeSpec("s_n0", tag="i", chunks=2),), ((START, "s_n0"), ("s_n0", END)))
    spec = GraphSpec(
        "any_predecessor",
        (NodeSpec("n0", tag="a"), NodeSpec("s", sub=inner)),
        ((START, "n0"), ("s", END)),
        (BranchSpec("n0", ("s", END), "first", stream=True),),
        max_run_steps=5,
    )
    code = spec.to_python()
    assert "g.add_branch('n0', branch(BranchSpec('n0', ('s', END), 'first', stream=True)))" in code
    namespace: dict[str, Any] = {}
    exec("from compose.graph import *\nfrom compose.testing import *\n" + code, namespace)
    assert await namespace["g_runnable"].invoke(X) == reference_run(spec, X) == {"s": {"s_n0": "xai"}}


@settings(max_examples=60, deadline=None)
@given(spec=graphs(duplicate_keys=True))
def test_generated_specs_compile_and_are_well_formed(spec: GraphSpec) -> None:
    build(spec).compile(**spec.compile_options())
    keys = spec.all_keys()
    assert len(keys) == len(set(keys))
    for b in spec.branches:
        assert not {e for s, e in spec.edges if s == b.source} & set(b.targets)


def test_same_outcome() -> None:
    steps = MaxStepsExceededError(3)
    assert same_outcome(None, None)
    assert not same_outcome(steps, None)
    assert same_outcome(MaxStepsExceededError(4), steps)
    wrapped = NodeRunError(["sub"], steps)
    assert same_outcome(wrapped, steps)
    assert not same_outcome(GraphRunError("no tasks to execute"), steps)


async def test_assert_no_leaks_catches_an_open_stream() -> None:
    with pytest.raises(AssertionError, match="stream readers left open"):
        async with assert_no_leaks():
            leaked = StreamReader.from_iterable([1, 2])
            await leaked.recv()
    await leaked.aclose()
    async with assert_no_leaks():
        reader: StreamReader[int]
        writer: StreamWriter[int]
        reader, writer = pipe(2)
        await writer.aclose()
        await reader.aclose()


async def test_assert_no_leaks_catches_a_running_task() -> None:
    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        with pytest.raises(AssertionError, match="tasks left running"):
            async with assert_no_leaks():
                tg.start_soon(release.wait)
        release.set()


def test_import_compose_does_not_import_testing_or_hypothesis() -> None:
    code = "import sys, compose; assert 'compose.testing' not in sys.modules and 'hypothesis' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_scripted_chat_model_is_reexported() -> None:
    from compose.models.scripted import ScriptedChatModel as Original

    assert ScriptedChatModel is Original


@settings(max_examples=30, deadline=None)
@given(script=chat_scripts(("echo", "stop"), failures=True))
def test_chat_scripts_play_their_rounds(script: ChatScript) -> None:
    async def main() -> None:
        model = script.model()
        for r in range(len(script.rounds) + 1):
            streaming = r % 2 == 1
            failing = script.fail_at_call == r or (
                streaming and script.fail_at_chunk is not None and script.fail_at_chunk[0] == r
            )
            try:
                if streaming:
                    answer = await concat(await model.stream([user_message("go")]))
                else:
                    answer = await model.generate([user_message("go")])
            except ModelServerError:
                assert failing or script.fail_at_chunk is not None
                return
            if r < len(script.rounds):
                assert [c.id for c in answer.tool_calls] == script.call_ids(r)
                assert [c.function.name for c in answer.tool_calls] == list(script.rounds[r])
            else:
                assert answer.content == script.final and not answer.tool_calls
        assert script.fail_at_call is None  # a scripted call failure always fires

    anyio.run(main)
