"""Properties of the builders on top of Graph (issue 15).

* A random ``Chain`` (lambdas, stream lambdas, passthroughs, parallels, branches) is the graph one builds by hand
  with ``Graph``: the same nodes, edges and branches (Eino's default keys), and the same outputs for random
  inputs, invoke and stream.
* A random ``Workflow`` (nodes fed by random field mappings from START and earlier nodes, nested paths, whole
  values, static values, control-only and data-only edges) gives, in all four paradigms, what a reference gives
  that applies the same mappings to plain dicts in topological order.

The number of examples is a share of the hypothesis profile's (``tests/property/conftest.py``).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from compose import (
    END,
    START,
    Chain,
    ChainBranch,
    FieldMapping,
    Graph,
    GraphBranch,
    Lambda,
    Parallel,
    Workflow,
)
from compose.stream import StreamReader, concat
from compose.testing import assert_no_leaks

pytestmark = pytest.mark.anyio


def flat(x: Any) -> str:
    """A value as text: a string itself, a dict its values' texts in key order."""
    if isinstance(x, dict):
        return "".join(flat(x[k]) for k in sorted(x))
    return str(x)


def tagger(tag: str) -> Any:
    def f(x: Any) -> str:
        return flat(x)[-6:] + tag

    return f


def stream_tagger(tag: str) -> Any:
    async def f(x: Any) -> AsyncIterator[str]:
        text = flat(x)[-6:] + tag
        for i in range(0, len(text), 2):
            yield text[i : i + 2]

    return Lambda(stream=f)


def node_fn(tag: str, streaming: bool) -> Any:
    return stream_tagger(tag) if streaming else tagger(tag)


def chooser(n: int) -> Any:
    def choose(x: Any) -> int:
        return zlib.crc32(flat(x).encode()) % n

    return choose


# ----------------------------------------------------------------------------------------------------------
# Chain == hand-built Graph


@dataclass
class Step:
    kind: str  # "lambda", "passthrough", "parallel", "branch"
    tags: list[str]
    streams: list[bool]


@st.composite
def chain_steps(draw: Any) -> list[Step]:
    steps: list[Step] = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["lambda", "lambda", "passthrough", "parallel", "branch"]))
        if kind in ("parallel", "branch") and steps and steps[-1].kind in ("parallel", "branch"):
            steps.append(Step("passthrough", [], []))  # several tails must be joined first
        n = draw(st.integers(2, 3)) if kind in ("parallel", "branch") else 1
        tags = [f"{chr(97 + i)}{j}" for j in range(n)] if kind != "passthrough" else []
        steps.append(Step(kind, tags, [draw(st.booleans()) for _ in tags]))
    return steps


def build_chain(steps: list[Step]) -> Chain[Any, Any]:
    chain = Chain[Any, Any]()
    for s in steps:
        if s.kind == "lambda":
            chain.append_lambda(node_fn(s.tags[0], s.streams[0]))
        elif s.kind == "passthrough":
            chain.append_passthrough()
        elif s.kind == "parallel":
            par = Parallel()
            for tag, streaming in zip(s.tags, s.streams, strict=True):
                par.add_lambda(tag, node_fn(tag, streaming))
            chain.append_parallel(par)
        else:
            pick = chooser(len(s.tags))
            tags = s.tags
            br = ChainBranch(lambda x, pick=pick, tags=tags: tags[pick(x)])
            for tag, streaming in zip(s.tags, s.streams, strict=True):
                br.add_lambda(tag, node_fn(tag, streaming))
            chain.append_branch(br)
    return chain


def build_graph(steps: list[Step]) -> Graph[Any, Any]:
    """The same pipeline by hand: Eino's chain keys, edges from every tail, output keys, branches."""
    g = Graph[Any, Any]()
    tails = [START]
    for i, s in enumerate(steps):
        key = f"node_{i}"
        if s.kind in ("lambda", "passthrough"):
            if s.kind == "lambda":
                g.add_lambda_node(key, node_fn(s.tags[0], s.streams[0]))
            else:
                g.add_passthrough_node(key)
            for t in tails:
                g.add_edge(t, key)
            tails = [key]
        elif s.kind == "parallel":
            keys = [f"{key}_parallel_{j}" for j in range(len(s.tags))]
            for k, tag, streaming in zip(keys, s.tags, s.streams, strict=True):
                g.add_lambda_node(k, node_fn(tag, streaming), output_key=tag)
                g.add_edge(tails[0], k)
            tails = keys
        else:
            keys = [f"{key}_branch_{tag}" for tag in s.tags]
            for k, tag, streaming in zip(keys, s.tags, s.streams, strict=True):
                g.add_lambda_node(k, node_fn(tag, streaming))
            pick = chooser(len(keys))
            g.add_branch(tails[0], GraphBranch(lambda x, pick=pick, keys=keys: keys[pick(x)], set(keys)))
            tails = keys
    for t in tails:
        g.add_edge(t, END)
    return g


def shape(r: Any) -> tuple[Any, ...]:
    info = r.graph_info()
    return (
        sorted((n.key, n.kind, n.output_key) for n in info.nodes),
        sorted(info.edges),
        sorted((b.start, tuple(sorted(b.end_nodes))) for b in info.branches),
        info.trigger_mode,
    )


# a share of the profile's examples: each one compiles two graphs (the ``long`` profile still runs more)
@settings(max_examples=max(50, settings().max_examples // 2))
@given(steps=chain_steps(), x=st.text("xyz", min_size=1, max_size=5))
async def test_chain_is_the_graph_built_by_hand(steps: list[Step], x: str) -> None:
    note(repr(steps))
    chain_r = build_chain(steps).compile(name="p")
    graph_r = build_graph(steps).compile(name="p")
    assert shape(chain_r) == shape(graph_r)
    async with assert_no_leaks():
        want = await graph_r.invoke(x)
        assert await chain_r.invoke(x) == want
        assert await concat(await chain_r.stream(x)) == await concat(await graph_r.stream(x))


# ----------------------------------------------------------------------------------------------------------
# Workflow field mappings == the same mappings applied to plain dicts

Path = tuple[str, ...]
NAMES = ("p", "q", "r")


@dataclass
class Input:
    src: str
    mappings: list[tuple[Path, Path]]  # (from_path, to_path)
    direct: bool = True


@dataclass
class WNode:
    key: str
    inputs: list[Input] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)  # control only
    static: dict[Path, str] = field(default_factory=dict)


def paths_of(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path into ``value`` (the empty path included)."""
    out = [prefix]
    if isinstance(value, dict):
        for k in sorted(value):
            out.extend(paths_of(value[k], (*prefix, k)))
    return out


def get(value: Any, path: Path) -> Any:
    for name in path:
        value = value[name]
    return value


def put(target: dict[str, Any], path: Path, value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def node_out(key: str, x: Any) -> dict[str, Any]:
    return {"by": key, "in": x}


def reference(nodes: list[WNode], end: WNode, x: dict[str, Any]) -> Any:
    """Each node's input from its mappings over plain dicts, in order (nodes are topologically ordered)."""
    outs: dict[str, Any] = {START: x}
    for n in nodes:
        outs[n.key] = node_out(n.key, reference_input(n, outs))
    return reference_input(end, outs)


def reference_input(n: WNode, outs: dict[str, Any]) -> Any:
    pairs = [(inp.src, f, t) for inp in n.inputs for f, t in inp.mappings]
    if any(t == () for _, _, t in pairs):
        ((src, f, _),) = pairs
        return get(outs[src], f)
    built: dict[str, Any] = {}
    for path, v in n.static.items():
        put(built, path, v)
    for src, f, t in pairs:
        put(built, t, get(outs[src], f))
    return built


def sample_input() -> dict[str, Any]:
    return {"a": {"x": "1", "y": "2"}, "b": "3", "c": {"d": {"e": "4"}}}


@st.composite
def workflows(draw: Any) -> tuple[list[WNode], WNode]:
    nodes = [WNode(f"n{i}") for i in range(draw(st.integers(0, 4)))]
    end = WNode(END)
    outs: dict[str, Any] = {START: sample_input()}
    ancestors: dict[str, set[str]] = {START: set()}
    for n in [*nodes, end]:
        earlier = list(outs)
        used: list[Path] = []

        def free(path: Path, used: list[Path] = used) -> bool:
            return all(path[: len(u)] != u and u[: len(path)] != path for u in used)

        whole = draw(st.integers(0, 5)) == 0
        if whole:  # the whole input from one field (or all) of one predecessor
            src = draw(st.sampled_from(earlier))
            n.inputs.append(Input(src, [(draw(st.sampled_from(paths_of(outs[src]))), ())]))
        else:
            for _ in range(draw(st.integers(1, 4))):
                src = draw(st.sampled_from(earlier))
                to = tuple(draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3)))
                if not free(to):
                    continue
                used.append(to)
                frm = draw(st.sampled_from(paths_of(outs[src])))
                existing = next((inp for inp in n.inputs if inp.src == src), None)
                if existing is not None:
                    existing.mappings.append((frm, to))
                else:
                    n.inputs.append(Input(src, [(frm, to)]))
            for _ in range(draw(st.integers(0, 2))):
                to = ("s", draw(st.sampled_from(NAMES)))
                if free(to):
                    used.append(to)
                    n.static[to] = draw(st.sampled_from(["S", "T"]))
        for extra in draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True)):
            if extra not in {inp.src for inp in n.inputs}:
                n.deps.append(extra)
        # data only where another control predecessor is (or follows) the source: START always is
        control = {inp.src for inp in n.inputs} | set(n.deps)
        for inp in n.inputs:
            others = control - {inp.src}
            reach = set().union(*(ancestors[o] | {o} for o in others)) if others else set()
            if inp.src in reach and draw(st.booleans()):
                inp.direct = False
        directs = {inp.src for inp in n.inputs if inp.direct} | set(n.deps)
        ancestors[n.key] = set().union(*(ancestors[s] | {s} for s in directs))
        outs[n.key] = node_out(n.key, reference_input(n, outs))
    return nodes, end


def build_workflow(nodes: list[WNode], end: WNode) -> Workflow[dict[str, Any], Any]:
    wf = Workflow[dict[str, Any], Any]()

    def handle(n: WNode, wn: Any) -> None:
        for inp in n.inputs:
            mappings = [FieldMapping(f, t) for f, t in inp.mappings]
            wn.add_input(inp.src, *mappings, direct_dependency=inp.direct)
        for d in n.deps:
            wn.add_dependency(d)
        for path, v in n.static.items():
            wn.set_static_value(list(path), v)

    for n in nodes:

        def fn(x: Any, key: str = n.key) -> Any:
            return node_out(key, x)

        handle(n, wf.add_lambda_node(n.key, fn))
    handle(end, wf.end())
    return wf


def describe(nodes: list[WNode], end: WNode) -> str:
    return "\n".join(repr(n) for n in [*nodes, end])


@settings(max_examples=max(50, settings().max_examples // 4))
@given(wf=workflows(), values=st.lists(st.text("uvw", max_size=3), min_size=4, max_size=4), split=st.booleans())
async def test_workflow_mappings_match_plain_dict_reference(
    wf: tuple[list[WNode], WNode], values: list[str], split: bool
) -> None:
    nodes, end = wf
    note(describe(nodes, end))
    x = {"a": {"x": values[0], "y": values[1]}, "b": values[2], "c": {"d": {"e": values[3]}}}
    want = reference(nodes, end, x)
    r = build_workflow(nodes, end).compile()
    # the input as a stream: its top-level keys in separate chunks (or one chunk)
    pieces = [{"a": x["a"]}, {"b": x["b"], "c": x["c"]}] if split else [x]
    async with assert_no_leaks():
        assert await r.invoke(x) == want
        assert await concat(await r.stream(x)) == want
        assert await r.collect(StreamReader.from_iterable(pieces)) == want
        assert await concat(await r.transform(StreamReader.from_iterable(pieces))) == want
