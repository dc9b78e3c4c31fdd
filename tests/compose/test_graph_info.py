"""Seeing the graph: ``Runnable.graph_info()``, ``GraphInfo.to_mermaid()`` and compile callbacks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from compose.errors import GraphBuildError
from compose.graph import END, START, Graph
from compose.graph.branch import GraphBranch, StreamGraphBranch
from compose.graph.info import GraphCompileCallback, GraphInfo, NodeInfo
from compose.models import ScriptedChatModel
from compose.schema import Message, user_message
from compose.tools import tool
from compose.tools.node import ToolsNode

pytestmark = pytest.mark.anyio


@tool
def ping(n: int = 0) -> str:
    """Ping.

    Args:
        n: n
    """
    return f"pong {n}"


@dataclass
class Notes:
    seen: list[str] = field(default_factory=list)


def prep(q: str) -> list[Message]:
    return [user_message(q)]


def route(m: Message) -> str:
    return "tools" if m.tool_calls else "pass"


def last(messages: list[Message]) -> str:
    return messages[-1].content


def text(m: Message) -> str:
    return m.content


def inner_graph() -> Graph[list[Message], str]:
    sub = Graph[list[Message], str]()
    sub.add_lambda_node("last", last)
    sub.add_edge(START, "last")
    sub.add_edge("last", END)
    return sub


def mixed_graph(model: ScriptedChatModel) -> Graph[str, str]:
    g = Graph[str, str](state=Notes)
    g.add_lambda_node("prep", prep)
    g.add_chat_model_node("model", model, name="Model")
    g.add_tools_node("tools", ToolsNode([ping]))
    g.add_graph_node("sub", inner_graph())
    g.add_passthrough_node("pass")
    g.add_lambda_node("text", text, output_key="out")
    g.add_lambda_node("unwrap", lambda d: d["out"])
    g.add_edge(START, "prep")
    g.add_edge("prep", "model")
    g.add_branch("model", GraphBranch(route, {"tools", "pass"}))
    g.add_edge("tools", "sub")
    g.add_edge("sub", END)
    g.add_edge("pass", "text")
    g.add_edge("text", "unwrap")
    g.add_edge("unwrap", END)
    return g


def test_info_of_a_graph_with_every_kind_of_node() -> None:
    model = ScriptedChatModel(["hi"])
    r = mixed_graph(model).compile(name="mixed")
    info = r.graph_info()

    assert (info.name, info.input_type, info.output_type) == ("mixed", str, str)
    assert (info.input_type_name, info.output_type_name) == ("str", "str")
    assert (info.trigger_mode, info.state_type) == ("any_predecessor", Notes)
    assert [(n.key, n.kind) for n in info.nodes] == [
        ("prep", "Lambda"),
        ("model", "ChatModel"),
        ("tools", "ToolsNode"),
        ("sub", "Graph"),
        ("pass", "Passthrough"),
        ("text", "Lambda"),
        ("unwrap", "Lambda"),
    ]
    m = info.node("model")
    assert (m.name, m.type_name, m.instance) == ("Model", "ScriptedChatModel", model)
    assert (m.input_type, m.output_type) == (list[Message], Message)
    assert (m.input_type_name, m.output_type_name) == ("list[Message]", "Message")
    assert info.node("prep").name == "prep"  # no name= option: the key
    assert (info.node("tools").input_type, info.node("tools").output_type) == (Message, list[Message])
    # a passthrough's type is the one inferred from its neighbours
    assert (info.node("pass").input_type, info.node("pass").output_type) == (Message, Message)
    t = info.node("text")
    assert (t.output_key, t.input_key, t.input_type, t.output_type) == ("out", None, Message, dict[str, Any])

    assert info.edges == (
        (START, "prep"),
        ("prep", "model"),
        ("tools", "sub"),
        ("sub", END),
        ("pass", "text"),
        ("text", "unwrap"),
        ("unwrap", END),
    )
    assert info.data_edges == info.control_edges == ()
    (b,) = info.branches
    assert (b.start, b.end_nodes, b.index, b.streaming, b.multi, b.input_type) == (
        "model", ("tools", "pass"), 0, False, False, Message,
    )

    sub = info.node("sub").graph
    assert sub is not None and info.sub_graphs == {"sub": sub}
    assert (sub.name, sub.input_type, sub.output_type) == ("sub", list[Message], str)
    assert [(n.key, n.kind) for n in sub.nodes] == [("last", "Lambda")]
    assert sub.edges == ((START, "last"), ("last", END))
    with pytest.raises(KeyError):
        info.node("nope")


def test_graph_info_is_built_once_and_a_compiled_sub_graph_shares_its_own() -> None:
    inner = inner_graph().compile(name="inner")
    g = Graph[list[Message], str](state=Notes)
    g.add_graph_node("sub", inner)
    g.add_edge(START, "sub")
    g.add_edge("sub", END)
    r = g.compile(trigger_mode="all_predecessor")
    info = r.graph_info()
    assert r.graph_info() is info
    assert info.node("sub").graph is inner.graph_info()
    assert info.trigger_mode == "all_predecessor"
    assert info.node("sub").instance is inner


async def test_a_run_is_unchanged_after_graph_info() -> None:
    r = mixed_graph(ScriptedChatModel(["hi", "again"])).compile()
    r.graph_info()
    assert await r.invoke("q") == "hi"


SMALL_MERMAID = """\
flowchart TD
    START(["start"])
    n0["a<br/>Lambda"]
    n1["b<br/>Lambda"]
    subgraph n2 ["inner<br/>Graph"]
        n2_START(["start"])
        n2_n0["last<br/>Lambda"]
        n2_END(["end"])
        n2_START --> n2_n0
        n2_n0 --> n2_END
    end
    END(["end"])
    START --> n0
    n1 --> n2
    n2 --> END
    n0 -.->|branch| n1
    n0 -.->|branch| END
"""


def to_messages(s: str) -> list[Message]:
    return [user_message(s)]


def test_mermaid_of_a_small_graph() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident)
    g.add_lambda_node("b", to_messages)
    g.add_graph_node("inner", inner_graph())
    g.add_edge(START, "a")
    g.add_branch("a", GraphBranch(lambda s: END, {"b", END}))
    g.add_edge("b", "inner")
    g.add_edge("inner", END)
    assert g.compile().graph_info().to_mermaid() == SMALL_MERMAID


def ident(s: str) -> str:
    return s


AWKWARD = [
    'say "hi"', "two words", "x[1]", "<b>#1</b>", "a|b", "(paren) {brace}", "END", "subgraph", "back`tick", "semi;colon"
]


def test_awkward_keys_are_escaped_and_ids_stay_unique() -> None:
    g = Graph[str, str]()
    prev = START
    for key in AWKWARD:
        g.add_lambda_node(key, ident)
        g.add_edge(prev, key)
        prev = key
    g.add_edge(prev, END)
    text = g.compile().graph_info().to_mermaid()
    labels = re.findall(r'^    (n\d+)\["(.*)"\]$', text, re.M)
    assert [i for i, _ in labels] == [f"n{k}" for k in range(len(AWKWARD))]
    for (_, label), key in zip(labels, AWKWARD, strict=True):
        assert not set(label.removesuffix("<br/>Lambda")) & set('"<>|[](){}`')
        unescaped = re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label.removesuffix("<br/>Lambda"))
        assert unescaped == key
    assert "#34;" in text  # the quote, as Mermaid's entity code


def test_compile_callbacks_get_the_top_level_info_once() -> None:
    seen: list[GraphInfo] = []
    sub_seen: list[GraphInfo] = []

    class Recorder:
        def on_finish(self, info: GraphInfo) -> None:
            seen.append(info)

    g = Graph[list[Message], str]()
    g.add_graph_node("sub", inner_graph(), compile_options={"compile_callbacks": [sub_seen.append]})
    g.add_edge(START, "sub")
    g.add_edge("sub", END)
    r = g.compile(name="top", compile_callbacks=[Recorder(), seen.append])
    assert [i.name for i in seen] == ["top", "top"]
    assert seen[0] is seen[1] is r.graph_info()
    # as in Eino, a parent's callbacks are not called for its sub-graphs; a sub-graph's own are, with its info
    assert [i.name for i in sub_seen] == ["sub"]
    assert r.graph_info().node("sub").graph is sub_seen[0]


def test_a_compile_callback_must_be_callable() -> None:
    g = Graph[str, str]()
    g.add_lambda_node("a", ident)
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(GraphBuildError, match="compile callback must be callable or have an on_finish"):
        g.compile(compile_callbacks=[42])  # type: ignore[list-item]
    assert g.compile() is not None  # the failed compile left the graph buildable


def test_the_react_agents_graph() -> None:
    info = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), tools=[ping]).runnable.graph_info()
    assert info.name == "a"
    assert [(n.key, n.kind) for n in info.nodes] == [("ChatModel", "ChatModel"), ("ToolNode", "ToolsNode")]
    assert info.edges == ((START, "ChatModel"), ("ToolNode", "ChatModel"))
    (b,) = info.branches
    assert (b.start, b.end_nodes, b.streaming) == ("ChatModel", ("ToolNode", END), True)
    assert info.to_mermaid() == (
        "flowchart TD\n"
        '    START(["start"])\n'
        '    n0["ChatModel<br/>ChatModel"]\n'
        '    n1["ToolNode<br/>ToolsNode"]\n'
        '    END(["end"])\n'
        "    START --> n0\n"
        "    n1 --> n0\n"
        "    n0 -.->|branch| n1\n"
        "    n0 -.->|branch| END\n"
    )


def test_the_react_agents_graph_with_return_directly_tools() -> None:
    tools = ToolsConfig([ping], return_directly={"ping"})
    agent = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), tools=tools)
    info = agent.runnable.graph_info()
    assert [(n.key, n.kind) for n in info.nodes] == [
        ("ChatModel", "ChatModel"),
        ("ToolNode", "ToolsNode"),
        ("ToolNodeToEndConverter", "Lambda"),
    ]
    assert info.edges == ((START, "ChatModel"), ("ToolNodeToEndConverter", END))
    assert [(b.start, b.end_nodes) for b in info.branches] == [
        ("ChatModel", ("ToolNode", END)),
        ("ToolNode", ("ChatModel", "ToolNodeToEndConverter")),
    ]
    assert "    n1 -.->|branch| n2\n" in info.to_mermaid()


def test_the_react_agents_graph_without_tools() -> None:
    info = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"])).runnable.graph_info()
    assert [n.key for n in info.nodes] == ["ChatModel"]
    assert info.edges == ((START, "ChatModel"), ("ChatModel", END)) and info.branches == ()


def test_a_stream_branch_is_marked_streaming() -> None:
    async def cond(r: Any) -> str:
        return "b"

    g = Graph[str, str]()
    g.add_lambda_node("a", ident)
    g.add_lambda_node("b", ident)
    g.add_edge(START, "a")
    g.add_branch("a", StreamGraphBranch(cond, {"b", END}))
    g.add_branch("a", GraphBranch(lambda s: "b", {"b"}))
    g.add_edge("b", END)
    info = g.compile().graph_info()
    assert [(b.index, b.streaming) for b in info.branches] == [(0, True), (1, False)]
    mermaid = info.to_mermaid()
    assert "n0 -.->|branch 0| n1" in mermaid and "n0 -.->|branch 1| n1" in mermaid


def test_data_only_and_control_only_edges_are_drawn_apart() -> None:
    # no Graph has them (a Workflow will): a hand-made GraphInfo
    a = NodeInfo("a", "Lambda", "a", "f", str, str)
    b = NodeInfo("b", "Lambda", "b", "g", str, str)
    info = GraphInfo(
        name="w",
        nodes=(a, b),
        edges=((START, "a"), ("b", END)),
        branches=(),
        input_type=str,
        output_type=str,
        data_edges=(("a", "b"),),
        control_edges=((START, "b"),),
    )
    assert info.to_mermaid().endswith("    n0 -->|data| n1\n    START ==>|control| n1\n")


def test_an_object_with_on_finish_is_a_graph_compile_callback() -> None:
    class Recorder:
        def on_finish(self, info: GraphInfo) -> None:
            pass

    assert isinstance(Recorder(), GraphCompileCallback)
    assert not isinstance(print, GraphCompileCallback)
