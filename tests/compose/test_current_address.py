"""compose.interrupt.current_address: the address of the running node, in runs started inside track_addresses()
(durable runs name their steps with it); None in other runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from compose import END, START, Graph, GraphBranch
from compose.interrupt import current_address, track_addresses
from compose.lambdas import Lambda

pytestmark = pytest.mark.anyio


def _recorder(seen: list[tuple[str, str | None]], name: str, delay: float = 0.0) -> Any:
    async def node(x: int) -> int:
        before = current_address()
        await anyio.sleep(delay)  # siblings run meanwhile: each still sees its own address
        assert current_address() == before
        seen.append((name, before))
        return x + 1

    return node


async def test_untracked_runs_see_no_address() -> None:
    seen: list[tuple[str, str | None]] = []
    g = Graph[int, int]()
    g.add_lambda_node("a", _recorder(seen, "a"))
    g.add_edge(START, "a")
    g.add_edge("a", END)
    assert await g.compile(name="G").invoke(0) == 1
    assert seen == [("a", None)]


@pytest.mark.parametrize("mode", ["any_predecessor", "all_predecessor"])
async def test_parallel_nodes_and_sub_graph_nodes_see_their_own_addresses(mode: str) -> None:
    seen: list[tuple[str, str | None]] = []
    sub = Graph[int, int]()
    sub.add_lambda_node("inner", _recorder(seen, "inner", 0.01))
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    g = Graph[int, dict[str, int]]()
    g.add_lambda_node("slow", _recorder(seen, "slow", 0.05), output_key="slow")
    g.add_lambda_node("fast", _recorder(seen, "fast"), output_key="fast")
    g.add_graph_node("sub", sub, output_key="sub")
    for k in ("slow", "fast", "sub"):
        g.add_edge(START, k)
        g.add_edge(k, END)
    r = g.compile(name="G", trigger_mode=mode)  # type: ignore[arg-type]
    with track_addresses():
        assert await r.invoke(1) == {"slow": 2, "fast": 2, "sub": 2}
        assert current_address() == ""  # the top of a tracked block: no node
    assert current_address() is None
    assert sorted(seen) == [
        ("fast", "runnable:G;node:fast"),
        ("inner", "runnable:G;node:sub;node:inner"),
        ("slow", "runnable:G;node:slow"),
    ]


async def test_a_tracked_loop_runs_each_node_with_its_address() -> None:
    """The fused loop of one-node steps sets no address: a tracked run takes the general path, same result."""
    seen: list[tuple[str, str | None]] = []
    g = Graph[int, int]()
    g.add_lambda_node("a", _recorder(seen, "a"))
    g.add_lambda_node("b", _recorder(seen, "b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_branch("b", GraphBranch(lambda x: END if x >= 6 else "a", {"a", END}))
    r = g.compile(name="L")
    assert await r.invoke(0) == 6
    untracked = list(seen)
    seen.clear()
    with track_addresses():
        assert await r.invoke(0) == 6
    assert untracked == [(n, None) for n in "ababab"]
    assert seen == [(n, f"runnable:L;node:{n}") for n in "ababab"]


async def test_a_streaming_node_sees_its_address_when_called() -> None:
    seen: list[str | None] = []

    async def shout(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
        seen.append(current_address())
        async for c in chunks:
            yield c.upper()

    g = Graph[str, str]()
    g.add_lambda_node("shout", Lambda(transform=shout))
    g.add_edge(START, "shout")
    g.add_edge("shout", END)
    with track_addresses():
        reader = await g.compile(name="S").stream("hi")
        assert [c async for c in reader] == ["HI"]
    assert seen == ["runnable:S;node:shout"]
