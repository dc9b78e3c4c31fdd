"""Builder and compile-time checks (eino-semantics 1.1, 1.2, 1.5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from compose.errors import GraphBuildError, GraphCompiledError, InvalidGraphError, TypeMismatchError
from compose.graph import END, START, Graph
from compose.graph.branch import GraphBranch
from compose.lambdas import Lambda
from compose.schema import Message


def to_int(s: str) -> int:
    return len(s)


def to_str(n: int) -> str:
    return str(n)


def ident_str(s: str) -> str:
    return s


def test_reserved_and_duplicate_names() -> None:
    g = Graph[str, str]()
    with pytest.raises(GraphBuildError, match="node 'start' is reserved, cannot add manually"):
        g.add_lambda_node(START, ident_str)
    with pytest.raises(GraphBuildError, match="node 'end' is reserved"):
        g.add_lambda_node(END, ident_str)
    g.add_lambda_node("a", ident_str)
    with pytest.raises(GraphBuildError, match="node 'a' has been added yet"):
        g.add_lambda_node("a", ident_str)


def test_edge_errors_raise_at_the_call_and_are_not_sticky() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    with pytest.raises(GraphBuildError, match="END cannot be a start node"):
        g.add_edge(END, "a")
    with pytest.raises(GraphBuildError, match="START cannot be an end node"):
        g.add_edge("a", START)
    with pytest.raises(GraphBuildError, match="edge start node 'x' needs to be added to graph first"):
        g.add_edge("x", "a")
    with pytest.raises(GraphBuildError, match="edge end node 'y' needs to be added to graph first"):
        g.add_edge("a", "y")
    g.add_edge(START, "a")
    with pytest.raises(GraphBuildError, match=r"control edge\[start\]-\[a\] have been added yet"):
        g.add_edge(START, "a")
    g.add_edge("a", END)  # earlier failures did not poison the builder
    assert g.compile() is not None


def test_type_mismatch_names_both_nodes_and_types() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("len", to_int)
    g.add_lambda_node("id", ident_str)
    with pytest.raises(TypeMismatchError) as info:
        g.add_edge("len", "id")
    msg = str(info.value)
    assert "graph edge[len]-[id]" in msg and "output type[int]" in msg and "input type[str]" in msg
    assert info.value.start == "len" and info.value.end == "id"
    assert info.value.output_type is int and info.value.input_type is str
    with pytest.raises(TypeMismatchError, match=r"graph edge\[start\]-\[len\]"):
        g2 = Graph[int, str]()
        g2.add_lambda_node("len", to_int)
        g2.add_edge(START, "len")


def test_branch_build_errors() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    with pytest.raises(GraphBuildError, match="branch end node 'nope' needs to be added to graph first"):
        g.add_branch("a", GraphBranch(lambda s: "nope", {"nope", END}))
    with pytest.raises(GraphBuildError, match="branch start node 'x' needs to be added to graph first"):
        g.add_branch("x", GraphBranch(lambda s: END, {END}))

    def cond(n: int) -> str:
        return END

    match = r"condition's input type\[int\] and start node\[a\]'s output type\[str\]"
    with pytest.raises(TypeMismatchError, match=match):
        g.add_branch("a", GraphBranch(cond, {END}))


def _line() -> Graph[str, str]:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    return g


def _handler(x: str, state: Any) -> str:
    return x


MISUSE: list[tuple[str, Any, type[Exception], str]] = [
    ("unknown node option", lambda g: g.add_lambda_node("b", ident_str, bogus=1), GraphBuildError,
     r"node 'b': unknown option\(s\) \['bogus'\]"),
    ("non-string key", lambda g: g.add_lambda_node(3, ident_str), GraphBuildError,
     "node key must be a non-empty string, got 3"),
    ("two pre handlers", lambda g: g.add_lambda_node("b", ident_str, pre_handler=_handler,
                                                     stream_pre_handler=_handler), GraphBuildError,
     "node 'b': give pre_handler or stream_pre_handler, not both"),
    ("two post handlers", lambda g: g.add_lambda_node("b", ident_str, post_handler=_handler,
                                                      stream_post_handler=_handler), GraphBuildError,
     "node 'b': give post_handler or stream_post_handler, not both"),
    ("not a tools node", lambda g: g.add_tools_node("t", object()), GraphBuildError,
     r"node 't': a tools node needs async invoke\(\) and stream\(\) methods"),
    ("not a graph", lambda g: g.add_graph_node("s", object()), GraphBuildError,
     "node 's': add_graph_node needs a Graph or a compiled Runnable"),
    ("not a branch", lambda g: g.add_branch("a", lambda s: END), GraphBuildError,
     "add_branch needs a GraphBranch/StreamGraphBranch"),
    ("branch from END", lambda g: g.add_branch(END, GraphBranch(lambda s: "a", {"a"})), GraphBuildError,
     "END cannot be a start node"),
    ("branch to START", lambda g: g.add_branch("a", GraphBranch(lambda s: END, {START, END})), GraphBuildError,
     "START cannot be an end node"),
    ("unknown trigger mode", lambda g: g.compile(trigger_mode="eager"), GraphBuildError,
     "unknown trigger mode 'eager'"),
    ("step limit below 1", lambda g: g.compile(max_run_steps=0), GraphBuildError,
     "max run steps limit must be at least 1"),
    ("unknown interrupt node", lambda g: g.compile(interrupt_before=["x"]), GraphBuildError,
     "interrupt node 'x' needs to be added to graph first"),
    ("not a checkpoint store", lambda g: g.compile(checkpoint_store=object()), GraphBuildError,
     "object is not a checkpoint store: it lacks get"),
    ("unknown fan-in node", lambda g: g.compile(fan_in_merge_config={"x": None}), GraphBuildError,
     "fan-in merge config names unknown node 'x'"),
]


@pytest.mark.parametrize(("case", "misuse", "error", "message"), MISUSE, ids=[m[0] for m in MISUSE])
def test_builder_misuse_raises_a_typed_error_at_the_call(
    case: str, misuse: Any, error: type[Exception], message: str
) -> None:
    g = _line()
    with pytest.raises(error, match=message):
        misuse(g)
    assert g.compile() is not None  # not sticky: the graph is still good


def test_mutation_after_compile_fails() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    g.compile()
    with pytest.raises(GraphCompiledError, match="graph has been compiled, cannot be modified"):
        g.add_lambda_node("b", ident_str)
    with pytest.raises(GraphCompiledError):
        g.add_edge(START, END)


def test_compile_structure_errors() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    with pytest.raises(InvalidGraphError, match="start node not set"):
        g.compile()
    g.add_edge(START, "a")
    with pytest.raises(InvalidGraphError, match="end node not set"):
        g.compile()
    g.add_lambda_node("orphan", ident_str)
    g.add_edge("orphan", END)
    g.add_edge("a", END)
    with pytest.raises(InvalidGraphError, match=r"\['orphan'\] cannot be reached from START"):
        g.compile()


def test_dag_loop_is_printed() -> None:
    g = Graph[str, str]()
    for k in "abc":
        g.add_lambda_node(k, ident_str)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", "a")
    g.add_edge("c", END)
    with pytest.raises(InvalidGraphError, match="DAG is invalid, has loop: a -> b -> c -> a"):
        g.compile(trigger_mode="all_predecessor")
    assert g.compile() is not None  # Pregel allows loops


def test_dag_rejects_max_steps() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident_str)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(GraphBuildError, match="cannot set max run steps in dag mode"):
        g.compile(trigger_mode="all_predecessor", max_run_steps=3)


def test_passthrough_types_are_inferred() -> None:
    g = Graph[str, int]()
    g.add_passthrough_node("p1")
    g.add_passthrough_node("p2")
    g.add_lambda_node("len", to_int)
    g.add_edge(START, "p1")
    g.add_edge("p1", "p2")
    g.add_edge("p2", "len")
    g.add_edge("len", END)
    g.compile()

    bad = Graph[str, str]()
    bad.add_passthrough_node("p")
    bad.add_lambda_node("to_str", to_str)
    bad.add_edge(START, "p")  # p is a str now
    with pytest.raises(TypeMismatchError, match=r"graph edge\[p\]-\[to_str\]: start node's output type\[str\]"):
        bad.add_edge("p", "to_str")


@dataclass
class St:
    seen: list[str] = field(default_factory=list)


@dataclass
class Other:
    x: int = 0


def test_handler_checks() -> None:
    g = Graph[str, str]()

    def pre(x: str, st: St) -> str:
        return x

    with pytest.raises(GraphBuildError, match="node 'a' needs state but graph state is not enabled"):
        g.add_lambda_node("a", ident_str, pre_handler=pre)

    gs = Graph[str, str](state=St)

    def pre_int(x: int, st: St) -> int:
        return x

    with pytest.raises(TypeMismatchError, match=r"node\[a\]'s pre handler type\[int\] is different from its input"):
        gs.add_lambda_node("a", ident_str, pre_handler=pre_int)

    def pre_other(x: str, st: Other) -> str:
        return x

    with pytest.raises(TypeMismatchError, match=r"pre handler state type\[Other\] is different from graph\[St\]"):
        gs.add_lambda_node("a", ident_str, pre_handler=pre_other)

    def pre_map(x: dict[str, Any], st: St) -> dict[str, Any]:
        return x

    gs.add_lambda_node("a", ident_str, pre_handler=pre_map, input_key="k")  # with input_key the type is a map
    with pytest.raises(TypeMismatchError, match="passthrough node\\[p\\]'s pre handler type isn't any"):
        gs.add_passthrough_node("p", pre_handler=pre)


def test_lambda_types_from_annotations() -> None:
    async def gen(x: int) -> Any:
        yield x

    lam = Lambda.from_function(to_int)
    assert lam.input_type is str and lam.output_type is int
    assert Lambda(invoke=to_int, input_type=bytes).input_type is bytes
    assert sorted(Lambda.from_function(gen).paradigms.implemented) == ["stream"]


def test_chat_model_and_tools_node_adders_type_their_nodes() -> None:
    class FakeModel:
        async def generate(self, messages: list[Message], **opts: Any) -> Message:
            return Message(role="assistant", content="x")

        async def stream(self, messages: list[Message], **opts: Any) -> Any:
            raise NotImplementedError

    class FakeTools:
        async def invoke(self, m: Message, **opts: Any) -> list[Message]:
            return []

        async def stream(self, m: Message, **opts: Any) -> Any:
            raise NotImplementedError

    g = Graph[list[Message], list[Message]]()
    g.add_chat_model_node("model", FakeModel())
    g.add_tools_node("tools", FakeTools())
    g.add_edge(START, "model")
    g.add_edge("model", "tools")
    g.add_edge("tools", END)
    g.compile()
    with pytest.raises(TypeMismatchError):
        g2 = Graph[list[Message], Message]()
        g2.add_tools_node("tools", FakeTools())
        g2.add_edge(START, "tools")
    with pytest.raises(GraphBuildError, match="chat model needs"):
        Graph[Any, Any]().add_chat_model_node("m", object())


def test_a_mismatch_through_a_passthrough_fails_at_the_edge_that_causes_it() -> None:
    """Eino's ``TestValidate``: a passthrough's type is inferred as edges are added, in either direction, so
    the edge that makes two types meet through passthroughs raises; a failed call changes nothing."""
    g = Graph[str, str]()
    g.add_lambda_node("1", ident_str)
    g.add_passthrough_node("2")
    g.add_passthrough_node("3")
    g.add_lambda_node("4", to_str)  # int -> str
    g.add_edge("3", "4")  # 3 is an int now
    g.add_edge("2", "3")  # and so is 2
    with pytest.raises(TypeMismatchError, match=r"graph edge\[1\]-\[2\]: start node's output type\[str\] and end "
                       r"node's input type\[int\] mismatch"):
        g.add_edge("1", "2")
    assert ("1", "2") not in g._edges
    g.add_lambda_node("5", to_int)  # str -> int
    g.add_edge("1", "5")
    g.add_edge("5", "2")
    g.add_edge(START, "1")
    g.add_edge("4", END)
    assert g.compile().input_type is str


def test_passthrough_with_input_and_output_keys() -> None:
    """As Eino, a passthrough takes ``input_key`` / ``output_key``: the keyed side is a ``dict[str, Any]``
    (its handlers take the dict), the other side is of any type."""

    def pre_map(x: dict[str, Any], st: St) -> dict[str, Any]:
        return x

    def pre_str(x: str, st: St) -> str:
        return x

    g = Graph[dict[str, Any], dict[str, Any]](state=St)
    g.add_passthrough_node("in", input_key="q", pre_handler=pre_map)
    g.add_passthrough_node("out", output_key="r", post_handler=pre_map)
    with pytest.raises(TypeMismatchError, match=r"node\[x\]'s pre handler type\[str\] is different from its input "
                       r"type\[dict\[str, Any\]\]"):
        g.add_passthrough_node("x", input_key="q", pre_handler=pre_str)
    with pytest.raises(TypeMismatchError, match=r"passthrough node\[y\]'s post handler type isn't any"):
        g.add_passthrough_node("y", input_key="q", post_handler=pre_str)
    g.add_edge(START, "in")
    g.add_edge("in", "out")
    g.add_edge("out", END)
    g.compile()


def _nested(levels: int) -> Graph[str, str]:
    """A leaf graph inside ``levels`` graphs, each a one-node graph around the previous one."""
    g = Graph[str, str]()
    g.add_lambda_node("leaf", lambda x: x + ".")
    g.add_edge(START, "leaf")
    g.add_edge("leaf", END)
    for i in range(levels):
        outer = Graph[str, str]()
        outer.add_graph_node(f"s{i}", g)
        outer.add_edge(START, f"s{i}")
        outer.add_edge(f"s{i}", END)
        g = outer
    return g


@pytest.mark.anyio
async def test_sub_graphs_nested_deeper_than_a_run_can_go_are_refused_at_compile(anyio_backend: Any) -> None:
    from compose.graph._compiler import max_nesting

    most = max_nesting()
    deepest = _nested(most - 1).compile()  # `most` graphs deep: runs
    assert await deepest.invoke("x") == "x."
    assert "".join([c async for c in await deepest.stream("x")]) == "x."
    with pytest.raises(GraphBuildError, match=rf"graph 's{most}' is {most + 1} graphs deep .*more than the {most}"):
        _nested(200).compile()  # refused where it first goes too deep, not with RecursionError at run time
