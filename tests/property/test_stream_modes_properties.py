"""Properties of stream modes on random graphs from ``compose.testing``, several modes at once.

A random spec runs as a sub-graph behind a chat model: ``START -> model -> adapt -> spec -> END`` (the model
streams the graph input's text in random chunks, ``adapt`` turns its message into the spec's input), in both
trigger modes of the top graph, read with ``stream`` or ``transform``. In one run with ``updates``, ``messages``,
``debug`` and ``output``:

* ``messages``: the tokens concatenate to the model's answer, with its node and namespace;
* ``updates``: exactly the node outputs the reference interpreter predicts (``subgraphs=True``: the spec's
  nodes with their namespace; ``False``: the top graph's only), each node's in its run order, in a DAG a node's
  after its predecessors', and each after that node's ``task_end``;
* ``debug``: each task ends after it started; the top graph's snapshots are numbered 1, 2, 3;
* ``output``: the chunks concatenate to the reference output, and come after the tokens they are made of;
* ``subgraphs=False``: no part of the spec's nodes but tokens.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compose import END, START, Graph, ScriptedChatModel, assistant_message, concat_messages, user_message
from compose.schema import Message
from compose.stream import StreamReader, concat_items
from compose.testing import GraphSpec, NodeSpec, build, graphs, reference_trace

pytestmark = pytest.mark.anyio


def _behind_a_model(spec: GraphSpec, text: str, chunk_size: int, mode: Any) -> Any:
    g = Graph[list[Message], Any]()
    g.add_chat_model_node("model", ScriptedChatModel([assistant_message(text)], chunk_size=chunk_size))

    async def adapt(m: Message) -> dict[str, str]:
        return {"in": m.content}

    g.add_lambda_node("adapt", adapt)
    g.add_graph_node("spec", build(spec), compile_options=spec.compile_options())
    for s, e in [(START, "model"), ("model", "adapt"), ("adapt", "spec"), ("spec", END)]:
        g.add_edge(s, e)
    return g.compile(trigger_mode=mode)


@settings(max_examples=100)
@given(
    spec=graphs(failures=False),
    text=st.text("xyz", min_size=1, max_size=6),
    chunk_size=st.integers(1, 3),
    mode=st.sampled_from(["any_predecessor", "all_predecessor"]),
    subgraphs=st.booleans(),
    how=st.sampled_from(["stream", "transform"]),
)
async def test_several_modes_at_once_each_keep_their_order(
    spec: GraphSpec, text: str, chunk_size: int, mode: str, subgraphs: bool, how: str
) -> None:
    expected = reference_trace(spec, {"in": text})
    if expected.error is not None:
        return
    r = _behind_a_model(spec, text, chunk_size, mode)
    modes = ["updates", "messages", "debug", "output"]
    x = [user_message("q")]
    if how == "stream":
        reader = await r.stream(x, stream_mode=modes, subgraphs=subgraphs)
    else:
        reader = await r.transform(StreamReader.from_iterable([x]), stream_mode=modes, subgraphs=subgraphs)
    async with reader:
        parts = [p async for p in reader]
    where = spec.to_python()

    if not subgraphs:  # the top graph's parts only, but for the tokens (from anywhere, with their namespace)
        assert all(p.namespace == () for p in parts if p.mode != "messages"), where
    else:
        assert any(p.namespace == ("spec",) for p in parts if p.mode == "debug"), where
    tokens = [p for p in parts if p.mode == "messages"]
    assert all(p.data[1] == {"node": "model", "namespace": ()} for p in tokens), where
    assert concat_messages([p.data[0] for p in tokens]).content == text, where
    kinds = [p.mode for p in parts]
    assert kinds.index("output") > max(i for i, k in enumerate(kinds) if k == "messages"), where
    assert concat_items([p.data for p in parts if p.mode == "output"]) == expected.output, where

    updates = [(p.namespace, key, _canon(v)) for p in parts if p.mode == "updates" for key, v in p.data.items()]
    inner = [(("spec", *ns), key, _canon(v)) for ns, key, v in expected.outputs if subgraphs]
    want = [((), "model", None), ((), "adapt", _canon({"in": text})), *inner, ((), "spec", _canon(expected.output))]
    got = [(ns, k, None if k == "model" else v) for ns, k, v in updates]
    assert Counter(map(repr, got)) <= Counter(map(repr, want)), (got, where)
    assert [k for ns, k, _ in got if not ns] == ["model", "adapt", "spec"], where
    eager = {(("spec", *ns), n.key) for ns, n in _lambdas(spec, ()) if n.chunks <= 1}
    for ns, key, _ in want:
        if (ns, key) in eager:
            assert [v for n, k, v in got if (n, k) == (ns, key)] == [v for n, k, v in want if (n, k) == (ns, key)]
    if subgraphs and spec.mode == "all_predecessor":  # each node once: after the nodes that fed it
        order = [k for n, k, _ in got if n == ("spec",)]
        for s, e in spec.edges:
            if s in order and e in order:
                assert order.index(s) < order.index(e), (s, e, order, where)

    # debug: a task ends after it starts; every update comes after its node's task_end; snapshots count up
    started: Counter[tuple[tuple[str, ...], str]] = Counter()
    ended: Counter[tuple[tuple[str, ...], str]] = Counter()
    snapshots = []
    for p in parts:
        if p.mode == "debug":
            d = p.data
            if d["type"] == "snapshot":
                snapshots.append(d["step"])
                continue
            (started if d["type"] == "task_start" else ended)[(p.namespace, d["node"])] += 1
            assert ended[(p.namespace, d["node"])] <= started[(p.namespace, d["node"])], (p, where)
        elif p.mode == "updates":
            node = next(iter(p.data))
            assert ended[(p.namespace, node)] >= 1, (p, where)
    assert snapshots == [1, 2, 3], where  # model, adapt, spec: three supersteps, or three node completions


def _lambdas(spec: GraphSpec, ns: tuple[str, ...]) -> list[tuple[tuple[str, ...], NodeSpec]]:
    out: list[tuple[tuple[str, ...], NodeSpec]] = []
    for n in spec.nodes:
        if n.sub is None:
            out.append((ns, n))
        else:
            out.extend(_lambdas(n.sub, (*ns, n.key)))
    return out


def _canon(value: Any) -> Any:
    """A value with dicts as sorted items (fan-in merges arrive in any key order)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _canon(v)) for k, v in value.items()))
    return value
