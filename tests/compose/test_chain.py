"""Chain, Parallel, ChainBranch (eino-semantics 1.12; Eino's chain_test.go, chain_branch_test.go)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from compose import (
    END,
    START,
    BranchError,
    Chain,
    ChainBranch,
    ChatTemplate,
    Document,
    Graph,
    GraphBuildError,
    GraphCompiledError,
    InvalidGraphError,
    Message,
    NodeRunError,
    Parallel,
    ScriptedChatModel,
    StreamReader,
    TypeMismatchError,
    assistant_message,
    user_message,
)

pytestmark = pytest.mark.anyio


def double(s: str) -> str:
    return s + s


def triple(s: str) -> str:
    return s * 3


def upper(s: str) -> str:
    return s.upper()


def length(s: str) -> int:
    return len(s)


def cond(s: str) -> str:
    return {"one": "one_key", "two": "two_key", "three": "three_key"}[s]


def node_keys(chain_runnable: Any) -> set[str]:
    return {n.key for n in chain_runnable.graph_info().nodes}


async def read_all(reader: StreamReader[Any]) -> list[Any]:
    return [x async for x in reader]


# ---------------------------------------------------------------------------------------------------- linear


async def test_linear_chain_invoke_stream_and_default_keys() -> None:
    chain = Chain[str, int]()
    chain.append_lambda(upper).append_lambda(double).append_lambda(length)
    r = chain.compile()
    assert await r.invoke("ab") == 4
    assert await read_all(await r.stream("ab")) == [4]
    assert node_keys(r) == {"node_0", "node_1", "node_2"}


async def test_streaming_lambda_chunks_pass_through() -> None:
    async def chunks(s: str) -> AsyncIterator[str]:
        for c in s:
            yield c

    r = Chain[str, str]().append_lambda(chunks).append_passthrough().compile()
    assert await read_all(await r.stream("abc")) == ["a", "b", "c"]
    assert await r.invoke("abc") == "abc"


async def test_node_key_option_and_index_still_counts() -> None:
    chain = Chain[str, str]()
    chain.append_lambda(upper, key="up").append_lambda(double).append_lambda(double, key="dd", name="doubler")
    r = chain.compile()
    assert node_keys(r) == {"up", "node_1", "dd"}
    assert await r.invoke("a") == "AAAA"
    assert {n.key: n.name for n in r.graph_info().nodes}["dd"] == "doubler"


async def test_chat_template_then_chat_model() -> None:
    template = ChatTemplate.from_messages("f-string", user_message("say {word}"))
    model = ScriptedChatModel([assistant_message("hello")])
    r = Chain[dict[str, Any], Message]().append_chat_template(template).append_chat_model(model).compile()
    out = await r.invoke({"word": "hi"})
    assert out.content == "hello"
    assert model.calls[0].messages[0].content == "say hi"


async def test_retrieval_components() -> None:
    class Split:
        async def transform(self, docs: Any, **_: Any) -> list[Document]:
            return [Document(id=f"{d.id}-{i}", content=w) for d in docs for i, w in enumerate(d.content.split())]

    class Store:
        async def store(self, docs: Any, **_: Any) -> list[str]:
            return [d.id for d in docs]

    chain = Chain[list[Document], list[str]]()
    chain.append_document_transformer(Split()).append_indexer(Store())
    assert await chain.compile().invoke([Document(id="d", content="a b")]) == ["d-0", "d-1"]


async def test_node_error_names_the_node_key() -> None:
    def boom(s: str) -> str:
        raise ValueError("fake error")

    r = Chain[str, str]().append_lambda(upper).append_lambda(boom, key="key_of_boom").compile()
    with pytest.raises(NodeRunError) as info:
        await r.invoke("x")
    assert info.value.node_path == ["key_of_boom"]


# ---------------------------------------------------------------------------------------------------- parallel


async def test_parallel_output_dict_and_keys() -> None:
    chain = Chain[str, dict[str, Any]]()
    chain.append_lambda(upper)
    chain.append_parallel(Parallel().add_lambda("d", double).add_lambda("t", triple).add_lambda("n", length))
    r = chain.compile()
    assert await r.invoke("a") == {"d": "AA", "t": "AAA", "n": 1}
    merged: dict[str, Any] = {}
    async for chunk in await r.stream("a"):
        merged.update(chunk)
    assert merged == {"d": "AA", "t": "AAA", "n": 1}
    assert node_keys(r) == {"node_0", "node_1_parallel_0", "node_1_parallel_1", "node_1_parallel_2"}


async def test_next_node_receives_the_parallel_dict() -> None:
    def join(d: dict[str, Any]) -> str:
        return f"{d['a']}|{d['b']}"

    chain = Chain[str, str]()
    chain.append_parallel(Parallel().add_lambda("a", double, key="k_a").add_passthrough("b")).append_lambda(join)
    r = chain.compile()
    assert await r.invoke("x") == "xx|x"
    assert node_keys(r) == {"k_a", "node_0_parallel_1", "node_1"}


def test_parallel_errors() -> None:
    with pytest.raises(GraphBuildError, match="append parallel invalid, not enough nodes, count = 1"):
        Chain[str, str]().append_parallel(Parallel().add_lambda("a", double))
    with pytest.raises(GraphBuildError, match="duplicate output key= a"):
        Parallel().add_lambda("a", double).add_lambda("a", triple)
    with pytest.raises(GraphBuildError, match="sets its output_key"):
        Parallel().add_lambda("a", double, output_key="z")


def test_parallel_or_branch_after_several_tails_needs_a_passthrough() -> None:
    chain = Chain[str, dict[str, Any]]()
    chain.append_parallel(Parallel().add_lambda("a", double).add_lambda("b", triple))
    with pytest.raises(GraphBuildError, match=r"multiple previous nodes: .*append_passthrough\(\)"):
        chain.append_parallel(Parallel().add_passthrough("c").add_passthrough("d"))
    with pytest.raises(GraphBuildError, match="append branch invalid, multiple previous nodes"):
        chain.append_branch(ChainBranch(cond).add_passthrough("x").add_passthrough("y"))
    chain.append_passthrough()
    chain.append_parallel(Parallel().add_passthrough("c").add_passthrough("d"))
    assert node_keys(chain.compile()) >= {"node_1", "node_2_parallel_0"}  # failed appends took no index


async def test_parallel_type_error_names_the_default_key_and_changes_nothing() -> None:
    chain = Chain[str, str]()
    chain.append_lambda(upper)

    def takes_int(n: int) -> int:
        return n

    with pytest.raises(TypeMismatchError, match="node_1_parallel_1"):
        chain.append_parallel(Parallel().add_lambda("a", double).add_lambda("b", takes_int))
    with pytest.raises(TypeMismatchError, match="key_of_b"):
        chain.append_parallel(Parallel().add_lambda("a", double).add_lambda("b", takes_int, key="key_of_b"))
    chain.append_lambda(double)  # the failed appends left nothing behind
    r = chain.compile()
    assert node_keys(r) == {"node_0", "node_1"}
    assert await r.invoke("a") == "AA"


# ---------------------------------------------------------------------------------------------------- branch


async def test_branch_invoke_selects_and_all_branch_nodes_are_tails() -> None:
    chain = Chain[str, str]()
    chain.append_branch(ChainBranch(cond).add_lambda("one_key", double).add_lambda("two_key", triple))
    chain.append_lambda(double)
    r = chain.compile()
    assert await r.invoke("two") == "twotwotwotwotwotwo"
    assert await r.invoke("one") == "oneoneoneone"
    assert node_keys(r) == {"node_0_branch_one_key", "node_0_branch_two_key", "node_1"}
    with pytest.raises(BranchError, match="unintended end node: three_key"):
        await r.invoke("three")
    with pytest.raises(BranchError, match="KeyError"):
        await r.invoke("four")


async def test_branch_with_async_condition_and_node_keys() -> None:
    async def acond(s: str) -> str:
        return "a" if s.lower().startswith("a") else "b"

    chain = Chain[str, str]().append_lambda(upper, key="up")
    chain.append_branch(ChainBranch(acond).add_lambda("a", double, key="key_a").add_lambda("b", triple))
    r = chain.compile()
    assert node_keys(r) == {"up", "key_a", "node_1_branch_b"}
    assert await r.invoke("x") == "XXX"
    assert await r.invoke("ab") == "ABAB"


async def test_stream_branch_decides_on_first_chunk() -> None:
    async def chunks(s: str) -> AsyncIterator[str]:
        for word in s.split():
            yield word

    async def first(reader: StreamReader[str]) -> str:
        async for chunk in reader:
            return "one" if chunk == "one" else "other"
        return "other"

    chain = Chain[str, str]().append_lambda(chunks)
    chain.append_branch(ChainBranch(first, stream=True).add_passthrough("one").add_lambda("other", upper))
    r = chain.compile()
    assert await read_all(await r.stream("one size")) == ["one", "size"]
    assert await r.invoke("two size") == "TWOSIZE"


async def test_multi_branch_and_stream_multi_branch() -> None:
    def both(s: str) -> set[str]:
        return {"1", "2"}

    async def both_stream(reader: StreamReader[str]) -> set[str]:
        await reader.aclose()
        return {"1", "2"}

    for branch in (ChainBranch(both, multi=True), ChainBranch(both_stream, stream=True, multi=True)):
        branch.add_passthrough("1", output_key="1").add_passthrough("2", output_key="2")
        branch.add_passthrough("3", output_key="3")
        r = Chain[str, dict[str, Any]]().append_branch(branch).compile()
        assert await r.invoke("start") == {"1": "start", "2": "start"}
        merged: dict[str, Any] = {}
        async for chunk in await r.stream("start"):
            merged.update(chunk)
        assert merged == {"1": "start", "2": "start"}


def test_branch_build_errors() -> None:
    with pytest.raises(GraphBuildError, match="nodeList length = 1"):
        Chain[str, str]().append_branch(ChainBranch(cond).add_lambda("one_key", double))
    with pytest.raises(GraphBuildError, match="duplicate branch node key= 1"):
        ChainBranch(cond).add_passthrough("1").add_passthrough("1")
    with pytest.raises(TypeError, match="must be callable"):
        ChainBranch(None)  # type: ignore[arg-type]
    # different node types in one branch: a chat template takes a dict, the chain's input is a str
    with pytest.raises(TypeMismatchError):
        Chain[str, str]().append_branch(
            ChainBranch(cond)
            .add_chat_template("t", ChatTemplate.from_messages("f-string"))
            .add_graph("c", Chain[str, str]().append_lambda(double))
        )
    # the branch nodes take ints, the chain's input (and the condition's) is a str
    def to_str(n: int) -> str:
        return str(n)

    with pytest.raises(TypeMismatchError):
        Chain[str, str]().append_branch(ChainBranch(cond).add_lambda("a", to_str).add_lambda("b", to_str))


# ---------------------------------------------------------------------------------------------------- errors


def test_empty_chain_and_trigger_mode_are_errors() -> None:
    with pytest.raises(InvalidGraphError, match="pre node keys not set, number of nodes in chain= 0"):
        Chain[str, str]().compile()
    chain = Chain[str, str]().append_lambda(double)
    with pytest.raises(GraphBuildError, match="chain doesn't support node trigger mode option"):
        chain.compile(trigger_mode="all_predecessor")


def test_types_are_checked_like_a_graph() -> None:
    with pytest.raises(TypeMismatchError, match="node_0"):
        Chain[int, str]().append_lambda(double)
    chain = Chain[str, str]().append_lambda(length)
    with pytest.raises(TypeMismatchError):
        chain.compile()
    chain.append_lambda(str)  # the failed compile left the chain open
    assert chain.compile() is not None
    assert Chain[str, Any]().append_lambda(length).compile() is not None


def test_modifying_a_compiled_chain() -> None:
    chain = Chain[str, str]().append_lambda(double)
    chain.compile()
    with pytest.raises(GraphCompiledError, match="chain has been compiled"):
        chain.append_lambda(double)
    with pytest.raises(GraphCompiledError):
        chain.append_parallel(Parallel().add_passthrough("a").add_passthrough("b"))
    assert chain.compile() is not None  # compiling again is fine
    assert "compiled" in repr(chain)


# ---------------------------------------------------------------------------------------------------- nesting


async def test_chain_as_a_graph_node() -> None:
    inner = Chain[str, str]().append_lambda(upper).append_lambda(double)
    g = Graph[str, int]()
    g.add_graph_node("inner", inner)
    g.add_lambda_node("len", length)
    g.add_edge(START, "inner")
    g.add_edge("inner", "len")
    g.add_edge("len", END)
    r = g.compile()
    assert await r.invoke("ab") == 4
    sub = {n.key: n for n in r.graph_info().nodes}["inner"].graph
    assert sub is not None
    assert {n.key for n in sub.nodes} == {"node_0", "node_1"}


async def test_graph_and_chain_inside_a_chain() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("up", upper)
    g.add_edge(START, "up")
    g.add_edge("up", END)
    inner = Chain[str, str]().append_lambda(double)
    outer = Chain[str, str]().append_graph(g).append_graph(inner, key="inner").append_lambda(double)
    r = outer.compile()
    assert await r.invoke("a") == "AAAA"
    assert await read_all(await r.stream("a")) == ["AAAA"]
    assert node_keys(r) == {"node_0", "inner", "node_2"}


def test_nested_chain_errors_surface_at_the_outer_compile() -> None:
    inner = Chain[str, str]()
    inner.append_branch(ChainBranch(cond).add_lambda("one_key", double).add_lambda("two_key", triple))
    # a parallel after a branch's two tails needs a passthrough
    with pytest.raises(GraphBuildError, match="multiple previous nodes"):
        inner.append_parallel(Parallel().add_lambda("a", double).add_lambda("b", triple))
    empty = Chain[str, str]()
    outer = Chain[str, str]().append_graph(empty)
    with pytest.raises(InvalidGraphError, match="pre node keys not set"):
        outer.compile()


def test_chain_with_state_handlers() -> None:
    seen: list[str] = []

    def pre(x: str, state: list[str]) -> str:
        state.append(x)
        seen.append(x)
        return x

    def new_state() -> list[str]:
        return []

    chain = Chain[str, str](state=new_state).append_lambda(double, pre_handler=pre)
    assert chain.compile() is not None
    with pytest.raises(GraphBuildError, match="needs state"):
        Chain[str, str]().append_lambda(double, pre_handler=pre)
