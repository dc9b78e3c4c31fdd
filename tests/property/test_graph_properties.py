"""Differential properties of the graph engine against ``compose.testing``'s reference interpreter.

Random graph specs (both trigger modes, branches, fan-in, loops, sub-graphs) run by the engine give what the
reference gives, in all four paradigms; the step limit is exact; skipped nodes never run; a run cancelled after a
random number of node executions leaves no open stream and no task. Only the public ``compose.testing`` API is
used. The number of examples comes from the hypothesis profile (``tests/property/conftest.py``).
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import anyio
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

from compose.errors import MaxStepsExceededError
from compose.stream import StreamReader, concat
from compose.testing import (
    GraphSpec,
    Trace,
    assert_no_leaks,
    build,
    graph_inputs,
    graphs,
    reference_trace,
    same_outcome,
)
from tests.compose.helpers import drive

pytestmark = pytest.mark.anyio

PARADIGMS = ("invoke", "stream", "collect", "transform")


def chunked(value: dict[str, str], cuts: list[int]) -> list[dict[str, str]]:
    """The input as a stream of chunks whose concatenation is ``value`` (every piece non-empty)."""
    text = value["in"]
    points = sorted({c % len(text) for c in cuts} - {0})
    bounds = [0, *points, len(text)]
    return [{"in": text[a:b]} for a, b in itertools.pairwise(bounds)]


async def run(
    spec: GraphSpec, x: dict[str, str], paradigm: str, *, cuts: list[int] | None = None, **opts: Any
) -> tuple[Any, BaseException | None, list[str]]:
    """Run ``spec`` in one paradigm: (output, error, executed node keys). Streams are read to the end."""
    executed: list[str] = []
    runnable = build(spec, observer=executed.append).compile(**spec.compile_options())
    try:
        if paradigm == "invoke":
            return await runnable.invoke(x, **opts), None, executed
        if paradigm == "collect":
            return await runnable.collect(StreamReader.from_iterable(chunked(x, cuts or [])), **opts), None, executed
        if paradigm == "stream":
            reader = await runnable.stream(x, **opts)
        else:
            reader = await runnable.transform(StreamReader.from_iterable(chunked(x, cuts or [])), **opts)
        return await concat(reader), None, executed  # concat reads to the end (or the error) and closes
    except Exception as exc:
        return None, exc, executed


def check(paradigm: str, got: tuple[Any, BaseException | None, list[str]], ref: Trace) -> None:
    out, err, executed = got
    assert same_outcome(err, ref), f"{paradigm}: engine {err!r}, reference {ref.errors!r}"
    if err is None:
        assert out == ref.output, f"{paradigm}: engine {out!r}, reference {ref.output!r}"
    assert not set(executed) & ref.skipped, f"{paradigm}: skipped nodes ran: {set(executed) & ref.skipped}"
    if ref.error is None:
        if paradigm == "invoke":
            assert Counter(executed) == Counter(ref.executed), f"ran {executed}, reference ran {ref.executed}"
        else:  # a stream lambda whose stream nobody reads never runs (lazy streams): fewer runs, never more
            assert Counter(executed) <= Counter(ref.executed), f"ran {executed}, reference ran {ref.executed}"


@given(spec=graphs(), x=graph_inputs(), cuts=st.lists(st.integers(0, 7), max_size=3))
async def test_engine_matches_reference_in_four_paradigms(spec: GraphSpec, x: dict[str, str], cuts: list[int]) -> None:
    note(spec.to_python())
    ref = reference_trace(spec, x)
    note(f"reference: {ref}")
    event(f"{spec.mode}: {type(ref.error).__name__ if ref.error else 'output'}")
    async with assert_no_leaks():
        for paradigm in PARADIGMS:
            check(paradigm, await run(spec, x, paradigm, cuts=cuts), ref)


@given(spec=graphs(duplicate_keys=True), x=graph_inputs())
async def test_fan_in_with_clashing_keys_matches_reference(spec: GraphSpec, x: dict[str, str]) -> None:
    """Clashing output keys: invoke runs fail with FanInMergeError exactly where the reference does."""
    note(spec.to_python())
    ref = reference_trace(spec, x)
    async with assert_no_leaks():
        check("invoke", await run(spec, x, "invoke"), ref)


@given(spec=graphs("any_predecessor", sub_graphs=False, failures=False, max_run_steps=False), x=graph_inputs())
async def test_step_limit_is_hit_exactly_when_the_reference_needs_more_steps(
    spec: GraphSpec, x: dict[str, str]
) -> None:
    note(spec.to_python())
    ref = reference_trace(spec, x)
    if ref.error is not None or ref.steps == 0:
        return
    needed = ref.steps
    assert reference_trace(spec, x, max_run_steps=needed).output == ref.output
    async with assert_no_leaks():
        for paradigm in ("invoke", "stream"):
            out, err, _ = await run(spec, x, paradigm, max_run_steps=needed)
            assert err is None and out == ref.output, f"{paradigm} with {needed} steps: {err!r}"
            if needed > 1:
                assert isinstance(reference_trace(spec, x, max_run_steps=needed - 1).error, MaxStepsExceededError)
                _, err, _ = await run(spec, x, paradigm, max_run_steps=needed - 1)
                assert isinstance(err, MaxStepsExceededError), f"{paradigm} with {needed - 1} steps: {err!r}"


@given(
    spec=graphs(),
    x=graph_inputs(),
    paradigm=st.sampled_from(PARADIGMS),
    cancel_after=st.integers(0, 5),
    read_first=st.booleans(),
)
async def test_cancellation_at_any_point_leaves_no_stream_and_no_task(
    spec: GraphSpec, x: dict[str, str], paradigm: str, cancel_after: int, read_first: bool
) -> None:
    """Cancel the caller's scope when the ``cancel_after``-th node starts (counted, not timed)."""
    note(spec.to_python())
    async with assert_no_leaks():
        with anyio.CancelScope() as scope:
            started = 0

            def observer(key: str) -> None:
                nonlocal started
                started += 1
                if started > cancel_after:
                    scope.cancel()

            runnable = build(spec, observer=observer).compile(**spec.compile_options())
            if cancel_after == 0:
                scope.cancel()
            try:
                if paradigm == "invoke":
                    await runnable.invoke(x)
                elif paradigm == "collect":
                    await runnable.collect(StreamReader.from_iterable([x]))
                else:
                    if paradigm == "stream":
                        reader = await runnable.stream(x)
                    else:
                        reader = await runnable.transform(StreamReader.from_iterable([x]))
                    async with reader:
                        if read_first:
                            await reader.recv()
                        await anyio.lowlevel.checkpoint()
                        async for _ in reader:
                            pass
            except Exception as exc:  # the run may end (with its own error) before the cancellation point
                assert reference_trace(spec, x).error is not None, f"unexpected {exc!r}"
        event("cancelled" if scope.cancelled_caught else "finished first")


async def run_stepped(
    spec: GraphSpec, x: dict[str, str], paradigm: str, split: bool = False, **opts: Any
) -> tuple[Any, BaseException | None, list[str]]:
    """Run ``spec`` (invoke or stream) one superstep at a time: with ``step()``, or (``split``) from this frame
    with split supersteps, each node awaited here, as the agent runner drives a graph."""
    executed: list[str] = []
    runnable = build(spec, observer=executed.append).compile(**spec.compile_options())
    streaming = paradigm == "stream"
    try:
        start = StreamReader.from_iterable([x]) if streaming else x
        if split:
            result = await drive(runnable, start, streaming=streaming, **opts)
        else:
            handle = await runnable.start_run(start, streaming=streaming, **opts)
            try:
                while not await handle.step():
                    pass
            finally:
                await handle.aclose()
            result = handle.result
        return (await concat(result) if streaming else result), None, executed
    except Exception as exc:
        return None, exc, executed


@given(
    spec=graphs("any_predecessor"),
    x=graph_inputs(),
    limit=st.none() | st.integers(1, 12),
    paradigm=st.sampled_from(["invoke", "stream"]),
)
async def test_runs_agree_with_runs_driven_one_superstep_at_a_time(
    spec: GraphSpec, x: dict[str, str], limit: int | None, paradigm: str
) -> None:
    """``invoke`` and ``stream`` run stretches of one-node supersteps in one fused loop; driven step by step, the
    same graph must give the same output (after running the same nodes) or the same kind of error (step limit
    included)."""
    note(spec.to_python())
    opts = {} if limit is None else {"max_run_steps": limit}
    async with assert_no_leaks():
        out, err, executed = await run(spec, x, paradigm, **opts)
        s_out, s_err, s_executed = await run_stepped(spec, x, paradigm, **opts)
        d_out, d_err, d_executed = await run_stepped(spec, x, paradigm, split=True, **opts)
    event(f"{paradigm}: {type(err).__name__ if err else 'output'}")
    assert type(err) is type(s_err), f"fused: {err!r}, stepped: {s_err!r}"
    assert type(err) is type(d_err), f"fused: {err!r}, split steps: {d_err!r}"
    assert out == s_out == d_out
    if err is None:
        # nodes of one superstep run concurrently (their start order is the event loop's), so compare multisets;
        # after a failure, how far concurrent siblings got before being cancelled is the event loop's too
        assert Counter(executed) == Counter(s_executed), f"fused ran {executed}, stepped ran {s_executed}"
        assert Counter(executed) == Counter(d_executed), f"fused ran {executed}, split steps ran {d_executed}"
