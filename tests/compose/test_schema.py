"""Message helpers and Eino's concat rules (eino-semantics 3.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compose.errors import ConcatError
from compose.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    ToolCall,
    Usage,
    assistant_message,
    concat_message_lists,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)


def frag(index: int | None, *, id: str = "", name: str = "", args: str = "", **kw: object) -> ToolCall:
    return ToolCall(id=id, index=index, function=FunctionCall(name=name, arguments=args), **kw)  # type: ignore[arg-type]


def chunk(content: str = "", **kw: object) -> Message:
    return Message(role="assistant", content=content, **kw)  # type: ignore[arg-type]


# --- helpers ------------------------------------------------------------------------------------------------


def test_helpers_build_messages_with_roles() -> None:
    assert system_message("s") == Message(role="system", content="s")
    assert user_message("u") == Message(role="user", content="u")
    call = frag(0, id="c1", name="f", args="{}")
    assert assistant_message("a", [call]) == Message(role="assistant", content="a", tool_calls=[call])
    assert tool_message("r", "c1", "f") == Message(role="tool", content="r", tool_call_id="c1", tool_name="f")


# --- concat_messages: scalar fields -------------------------------------------------------------------------


def test_single_message_is_returned_as_is() -> None:
    msg = chunk("only")
    assert concat_messages([msg]) is msg


def test_empty_list_is_an_error() -> None:
    with pytest.raises(ConcatError, match="empty"):
        concat_messages([])


def test_none_chunk_names_its_index() -> None:
    with pytest.raises(ConcatError) as info:
        concat_messages([chunk("a"), chunk("b"), chunk("c"), None])
    assert str(info.value) == "unexpected nil chunk in message stream, index: 3"


def test_single_none_chunk_is_an_error() -> None:
    with pytest.raises(ConcatError, match="index: 0"):
        concat_messages([None])


def test_content_and_reasoning_concatenate_in_order() -> None:
    out = concat_messages(
        [chunk("Hel", reasoning_content="thin"), chunk(""), chunk("lo", reasoning_content="king"), chunk("!")]
    )
    assert out == Message(role="assistant", content="Hello!", reasoning_content="thinking")


def test_different_roles_are_an_error_naming_both() -> None:
    with pytest.raises(ConcatError) as info:
        concat_messages([user_message("a"), assistant_message("b")])
    assert str(info.value) == "cannot concat messages with different roles: 'user' 'assistant'"


@pytest.mark.parametrize(
    ("field", "label"),
    [("name", "names"), ("tool_call_id", "toolCallIDs"), ("tool_name", "toolNames")],
)
def test_first_non_empty_wins_and_a_conflict_names_both(field: str, label: str) -> None:
    out = concat_messages([chunk("a"), chunk("b", **{field: "x"}), chunk("c", **{field: "x"}), chunk("d")])
    assert getattr(out, field) == "x"
    assert out.content == "abcd"
    with pytest.raises(ConcatError) as info:
        concat_messages([chunk(**{field: "x"}), chunk(), chunk(**{field: "y"})])
    assert str(info.value) == f"cannot concat messages with different {label}: 'x' 'y'"


def test_empty_fields_stay_empty() -> None:
    out = concat_messages([chunk("a"), chunk("b")])
    assert out.name is None
    assert out.tool_call_id is None
    assert out.tool_name is None
    assert out.response_meta is None
    assert out.tool_calls == []
    assert out.extra == {}


# --- response meta ------------------------------------------------------------------------------------------


def test_response_meta_created_if_any_chunk_has_one() -> None:
    out = concat_messages([chunk("a"), chunk("b", response_meta=ResponseMeta()), chunk("c")])
    assert out.response_meta == ResponseMeta(finish_reason="", usage=None)


def test_finish_reason_is_the_last_non_empty() -> None:
    out = concat_messages(
        [
            chunk(response_meta=ResponseMeta(finish_reason="tool_calls")),
            chunk(response_meta=ResponseMeta(finish_reason="stop")),
            chunk(response_meta=ResponseMeta(finish_reason="")),
            chunk(),
        ]
    )
    assert out.response_meta == ResponseMeta(finish_reason="stop")


def test_usage_counters_are_the_max_over_chunks() -> None:
    out = concat_messages(
        [
            chunk(
                response_meta=ResponseMeta(
                    usage=Usage(prompt_tokens=10, completion_tokens=1, total_tokens=11)
                )
            ),
            chunk(response_meta=ResponseMeta(finish_reason="stop")),
            chunk(
                response_meta=ResponseMeta(usage=Usage(prompt_tokens=3, completion_tokens=7, total_tokens=9))
            ),
        ]
    )
    assert out.response_meta == ResponseMeta(
        finish_reason="stop", usage=Usage(prompt_tokens=10, completion_tokens=7, total_tokens=11)
    )


# --- extra --------------------------------------------------------------------------------------------------


def test_one_extra_map_is_copied() -> None:
    extra = {"k": "v", "n": 1}
    out = concat_messages([chunk("a", extra=extra), chunk("b")])
    assert out.extra == {"k": "v", "n": 1}
    out.extra["k"] = "changed"
    assert extra == {"k": "v", "n": 1}


def test_extra_maps_merge_key_wise() -> None:
    out = concat_messages(
        [
            chunk(extra={"s": "ab", "n": 1, "mixed": 1}),
            chunk(extra={"s": "cd", "n": 2, "other": [1]}),
            chunk(extra={"s": "e", "mixed": "x", "new": "y"}),
            chunk(extra={"mixed": "z", "new": "w"}),
        ]
    )
    assert out.extra == {"s": "abcde", "n": 2, "mixed": "xz", "other": [1], "new": "yw"}


def test_string_extra_replaced_by_a_non_string() -> None:
    out = concat_messages([chunk(extra={"k": "a"}), chunk(extra={"k": 5})])
    assert out.extra == {"k": 5}


# --- tool calls ---------------------------------------------------------------------------------------------


def test_tool_call_fragments_merge_by_index() -> None:
    out = concat_messages(
        [
            chunk("thinking ", tool_calls=[frag(0, id="c0", name="search", args='{"q"')]),
            chunk(tool_calls=[frag(0, args=': "x"}')]),
        ]
    )
    assert out.tool_calls == [frag(0, id="c0", name="search", args='{"q": "x"}')]
    assert out.content == "thinking "


def test_interleaved_parallel_calls_are_sorted_by_index() -> None:
    out = concat_messages(
        [
            chunk(tool_calls=[frag(1, id="c1", name="b", args="[1")]),
            chunk(tool_calls=[frag(0, id="c0", name="a", args="{")]),
            chunk(tool_calls=[frag(1, args=",2]"), frag(0, args="}")]),
        ]
    )
    assert out.tool_calls == [frag(0, id="c0", name="a", args="{}"), frag(1, id="c1", name="b", args="[1,2]")]


def test_unindexed_calls_are_kept_as_is_and_first() -> None:
    out = concat_messages(
        [
            chunk(tool_calls=[frag(0, id="c0", name="a", args="{")]),
            chunk(tool_calls=[frag(None, id="u1", name="x", args="1")]),
            chunk(tool_calls=[frag(0, args="}"), frag(None, id="u2", name="y", args="2")]),
            chunk(tool_calls=[frag(None, id="", name="", args="")]),
        ]
    )
    assert out.tool_calls == [
        frag(None, id="u1", name="x", args="1"),
        frag(None, id="u2", name="y", args="2"),
        frag(None),
        frag(0, id="c0", name="a", args="{}"),
    ]


def test_merged_call_keeps_the_first_fragments_extra() -> None:
    out = concat_messages(
        [
            chunk(tool_calls=[frag(0, id="c0", name="a", extra={"first": True})]),
            chunk(tool_calls=[frag(0, args="{}", extra={"second": True})]),
        ]
    )
    assert out.tool_calls == [frag(0, id="c0", name="a", args="{}", extra={"first": True})]


def test_id_and_name_may_come_in_a_later_fragment() -> None:
    out = concat_messages(
        [chunk(tool_calls=[frag(2, args="{")]), chunk(tool_calls=[frag(2, id="c", name="n")])]
    )
    assert out.tool_calls == [frag(2, id="c", name="n", args="{")]


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        (frag(0, id="a"), frag(0, id="b"), "cannot concat ToolCalls with different tool id: 'a' 'b'"),
        (frag(0, name="f"), frag(0, name="g"), "cannot concat ToolCalls with different tool name: 'f' 'g'"),
        (
            frag(0, type="function"),
            frag(0, type="custom"),
            "cannot concat ToolCalls with different tool type: 'function' 'custom'",
        ),
    ],
)
def test_conflicting_call_fields_are_an_error_naming_both(
    first: ToolCall, second: ToolCall, message: str
) -> None:
    with pytest.raises(ConcatError) as info:
        concat_messages([chunk(tool_calls=[first]), chunk(tool_calls=[second])])
    assert str(info.value) == message


# --- concat_message_lists -----------------------------------------------------------------------------------


def test_lists_concatenate_slot_wise() -> None:
    a1, a2 = tool_message("4", "c1"), tool_message("2", "c1")
    b1 = tool_message("x", "c2")
    out = concat_message_lists([[a1, None, None], [None, b1, None], [a2, None, None]])
    assert out == [tool_message("42", "c1"), b1, None]
    assert out[1] is b1


def test_lists_of_different_lengths_are_an_error() -> None:
    with pytest.raises(ConcatError) as info:
        concat_message_lists([[None, None], [None]])
    assert str(info.value) == "unexpected array length. Got 1, expected 2"


def test_list_slot_conflicts_raise() -> None:
    with pytest.raises(ConcatError, match="toolCallIDs: 'a' 'b'"):
        concat_message_lists([[tool_message("1", "a")], [tool_message("2", "b")]])


def test_no_lists_give_an_empty_list() -> None:
    assert concat_message_lists([]) == []


# --- property: splitting a message into chunks and concatenating gives it back ------------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
ident = st.text(alphabet="abcdefghij0123456789_", min_size=1, max_size=8)


@st.composite
def split_text(draw: st.DrawFn, value: str, parts: int) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(value)), min_size=parts - 1, max_size=parts - 1)))
    bounds = [0, *cuts, len(value)]
    return [value[bounds[i] : bounds[i + 1]] for i in range(parts)]


@st.composite
def message_and_chunks(draw: st.DrawFn) -> tuple[Message, list[Message]]:
    n = draw(st.integers(1, 6))
    content = draw(text)
    reasoning = draw(text)
    calls = [
        ToolCall(id=draw(ident), index=i, function=FunctionCall(name=draw(ident), arguments=draw(text)))
        for i in range(draw(st.integers(0, 3)))
    ]
    finish = draw(st.sampled_from(["", "stop", "tool_calls"]))
    usage = draw(
        st.none() | st.builds(Usage, prompt_tokens=st.integers(0, 99), completion_tokens=st.integers(0, 99))
    )
    meta = ResponseMeta(finish_reason=finish, usage=usage) if finish or usage else None
    original = Message(
        role="assistant",
        content=content,
        reasoning_content=reasoning,
        tool_calls=calls,
        response_meta=meta,
    )

    content_parts = draw(split_text(content, n))
    reasoning_parts = draw(split_text(reasoning, n))
    chunk_calls: list[list[ToolCall]] = [[] for _ in range(n)]
    for call in calls:
        # a call starts in some chunk; its id and name ride only on its first fragment
        start = draw(st.integers(0, n - 1))
        arg_parts = draw(split_text(call.function.arguments, n - start))
        for k, part in enumerate(arg_parts):
            if k == 0:
                chunk_calls[start].append(call)
                chunk_calls[start][-1] = ToolCall(
                    id=call.id,
                    index=call.index,
                    function=FunctionCall(name=call.function.name, arguments=part),
                )
            elif part:
                chunk_calls[start + k].append(
                    ToolCall(index=call.index, function=FunctionCall(arguments=part))
                )
    chunks = [
        Message(
            role="assistant",
            content=content_parts[i],
            reasoning_content=reasoning_parts[i],
            tool_calls=chunk_calls[i],
            response_meta=meta if i == n - 1 else None,
        )
        for i in range(n)
    ]
    return original, chunks


@settings(max_examples=200, deadline=None)
@given(message_and_chunks())
def test_split_then_concat_round_trips(case: tuple[Message, list[Message]]) -> None:
    original, chunks = case
    assert concat_messages(chunks) == original
