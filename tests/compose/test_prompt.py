"""ChatTemplate and MessagesPlaceholder (Eino's components/prompt/chat_template_test.go and schema's message
formatting tests), per format; the Jinja2 sandbox; the chat template graph node."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from compose import (
    END,
    START,
    CallbackHandler,
    ChatTemplate,
    FormatType,
    Graph,
    Message,
    MessagesPlaceholder,
    MessagesPlaceholderError,
    NodeRunError,
    PromptError,
    RunInfo,
    ScriptedChatModel,
    TemplateFormatError,
    TemplateSandboxError,
    ToolCall,
    assistant_message,
    concat,
    system_message,
    user_message,
)
from compose.prompt import PromptCallbackInput, PromptCallbackOutput

pytestmark = pytest.mark.anyio

VALUES: dict[str, Any] = {
    "context": "it's beautiful day",
    "question": "how is the day today",
    "chat_history": [user_message("who are you"), assistant_message("I'm a helpful assistant")],
}
EXPECTED = [
    system_message("you are a helpful assistant.\nhere is the context: it's beautiful day"),
    user_message("who are you"),
    assistant_message("I'm a helpful assistant"),
    user_message("question: how is the day today"),
]


@pytest.mark.parametrize(
    ("format_type", "system", "user"),
    [
        (FormatType.F_STRING, "here is the context: {context}", "question: {question}"),
        ("f-string", "here is the context: {context}", "question: {question}"),
        (FormatType.JINJA2, "here is the context: {{context}}", "question: {{ question }}"),
        ("jinja2", "here is the context: {{context}}", "question: {{ question }}"),
    ],
)
async def test_format_eino_case(format_type: Any, system: str, user: str) -> None:
    template = ChatTemplate.from_messages(
        format_type,
        system_message("you are a helpful assistant.\n" + system),
        MessagesPlaceholder("chat_history", optional=True),
        user_message(user),
    )
    assert template.format_type is FormatType(format_type)
    assert await template.format(VALUES) == EXPECTED


@dataclass
class Document:
    id: str
    content: str
    meta: dict[str, Any]


async def test_document_values_are_rendered_and_looked_into() -> None:
    docs = [Document("1", "qwe", {"hello": 888}), Document("2", "asd", {"bye": 111})]
    template = ChatTemplate.from_messages(
        "f-string", system_message("single:{single_doc.content} meta:{single_doc.meta[hello]} n:{all_docs[1].id}")
    )
    [msg] = await template.format({"all_docs": docs, "single_doc": docs[0]})
    assert msg.content == "single:qwe meta:888 n:2"
    jinja = ChatTemplate.from_messages(
        "jinja2", system_message("{% for d in docs %}{{ d.id }}={{ d.content }};{% endfor %}")
    )
    assert [m.content for m in await jinja.format({"docs": docs})] == ["1=qwe;2=asd;"]


async def test_only_content_is_rendered_other_fields_are_copied() -> None:
    call = ToolCall(id="c1", function={"name": "f", "arguments": '{"x": "{x}"}'})  # type: ignore[arg-type]
    tpl = Message(role="assistant", content="{x}", name="{x}", tool_calls=[call], extra={"k": "{x}"})
    template = ChatTemplate.from_messages("f-string", tpl)
    [first] = await template.format({"x": "1"})
    assert first == Message(role="assistant", content="1", name="{x}", tool_calls=[call], extra={"k": "{x}"})
    first.tool_calls[0].id = "changed"
    first.extra["k"] = "changed"
    [second] = await template.format({"x": "2"})
    assert second.content == "2" and second.tool_calls[0].id == "c1" and second.extra == {"k": "{x}"}
    assert tpl.content == "{x}" and call.id == "c1"


async def test_an_empty_template_gives_no_messages() -> None:
    assert await ChatTemplate.from_messages("f-string").format({}) == []


async def test_extra_variables_are_ignored_and_f_string_formats_even_without_variables() -> None:
    template = ChatTemplate.from_messages("f-string", user_message("a {{literal}}"))
    assert await template.format({}) == [user_message("a {literal}")]
    assert await template.format({"unused": 1}) == [user_message("a {literal}")]


# ------------------------------------------------------------------------------------------------------------
# MessagesPlaceholder


async def test_placeholder_gives_the_messages_as_they_are() -> None:
    history = [user_message("{not rendered}")]
    [msg] = await ChatTemplate.from_messages("f-string", MessagesPlaceholder("h")).format({"h": history})
    assert msg is history[0]


async def test_a_missing_required_placeholder_names_its_key() -> None:
    template = ChatTemplate.from_messages("f-string", MessagesPlaceholder("history"), user_message("hi"))
    with pytest.raises(MessagesPlaceholderError, match="'history'") as info:
        await template.format({"question": "q"})
    assert info.value.key == "history"
    assert isinstance(info.value, PromptError) and isinstance(info.value, ValueError)


async def test_an_optional_placeholder_gives_no_messages() -> None:
    template = ChatTemplate.from_messages("jinja2", MessagesPlaceholder("history", optional=True), user_message("hi"))
    assert await template.format({}) == [user_message("hi")]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("hello", "got str"),
        (user_message("x"), "got Message"),
        ([user_message("x"), "y"], "got list of str"),
        ((user_message("x"),), "got tuple"),
    ],
)
async def test_a_placeholder_value_must_be_a_list_of_messages(value: Any, got: str) -> None:
    template = ChatTemplate.from_messages("f-string", MessagesPlaceholder("history", optional=True))
    with pytest.raises(MessagesPlaceholderError, match="'history' takes a list of Message") as info:
        await template.format({"history": value})
    assert got in str(info.value) and info.value.key == "history"


def test_reprs() -> None:
    assert repr(MessagesPlaceholder("h")) == "MessagesPlaceholder('h')"
    template = ChatTemplate.from_messages("jinja2", system_message("s"), MessagesPlaceholder("h", optional=True))
    assert repr(template) == "ChatTemplate('jinja2', [system, MessagesPlaceholder('h', optional=True)])"


class Upper:
    """A custom MessagesTemplate."""

    def format_messages(self, variables: Any, format_type: FormatType) -> list[Message]:
        return [user_message(str(variables["q"]).upper() + format_type.value)]


async def test_a_custom_messages_template() -> None:
    assert await ChatTemplate.from_messages("f-string", Upper()).format({"q": "a"}) == [user_message("Af-string")]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="Go templates are not supported"):
        ChatTemplate.from_messages("go-template", user_message("{{.x}}"))
    with pytest.raises(TypeError, match="chat template message 1: str is neither a Message"):
        ChatTemplate.from_messages("f-string", user_message("x"), "y")  # type: ignore[arg-type]


async def test_variables_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="dict of variables, got list"):
        await ChatTemplate.from_messages("f-string").format([])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------------
# f-string errors


async def test_f_string_missing_variable_names_the_key_and_the_message() -> None:
    template = ChatTemplate.from_messages("f-string", system_message("s"), user_message("Hi {name}, in {city}"))
    with pytest.raises(TemplateFormatError) as info:
        await template.format({"city": "Hangzhou"})
    err = info.value
    assert err.key == "name" and err.index == 1
    assert str(err) == "chat template message 1: the placeholder {name} names no variable 'name' (variables: city)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Single } here", "Single '}' encountered in format string"),
        ("Single { here", "expected '}' before end of string"),
        ("{}", "positional placeholder {}"),
        ("{0}", "positional placeholder {0}"),
        ("{x!r}", "conversion !r"),
        ("{x:{w}}", "contains a brace"),
        ("{x.}", "cannot read the field name"),
    ],
)
def test_malformed_f_strings_fail_when_built(text: str, message: str) -> None:
    with pytest.raises(TemplateFormatError, match="chat template message 0") as info:
        ChatTemplate.from_messages("f-string", user_message(text))
    assert message in str(info.value) and info.value.index == 0


@pytest.mark.parametrize(
    ("text", "message"), [("{x:d}", "cannot format {x:d} (str)"), ("{x.nope}", "str value has no 'nope'")]
)
async def test_f_string_render_errors(text: str, message: str) -> None:
    with pytest.raises(TemplateFormatError) as info:
        await ChatTemplate.from_messages("f-string", user_message(text)).format({"x": "s"})
    assert message in str(info.value)


# ------------------------------------------------------------------------------------------------------------
# Jinja2 and its sandbox


async def test_jinja2_control_flow_and_filters() -> None:
    template = ChatTemplate.from_messages(
        "jinja2",
        system_message("{% if vip %}Dear {{ name | title }}{% else %}Hi{% endif %}: {{ items | join(', ') }}"),
    )
    [msg] = await template.format({"vip": True, "name": "li wei", "items": ["a", "b"]})
    assert msg.content == "Dear Li Wei: a, b"


async def test_jinja2_undefined_variable_is_an_error_naming_it() -> None:
    template = ChatTemplate.from_messages("jinja2", user_message("{{ question }}"))
    with pytest.raises(TemplateFormatError, match="'question' is undefined") as info:
        await template.format({})
    assert info.value.key == "question" and not isinstance(info.value, TemplateSandboxError)
    guarded = ChatTemplate.from_messages("jinja2", user_message("{% if q is defined %}{{ q }}{% endif %}."))
    assert await guarded.format({}) == [user_message(".")]


def test_jinja2_syntax_errors_fail_when_built() -> None:
    with pytest.raises(TemplateFormatError, match="Jinja2 syntax error on line 1"):
        ChatTemplate.from_messages("jinja2", user_message("{% if x %}"))


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("{% include 'secrets.txt' %}", "include"),
        ("{% import 'macros.j2' as m %}", "import"),
        ("{% from 'macros.j2' import m %}", "from"),
        ("{% extends 'base.j2' %}", "extends"),
        ("ok\n{% if x %}{% include x %}{% endif %}", "include"),
    ],
)
def test_jinja2_file_tags_are_disabled(text: str, tag: str) -> None:
    with pytest.raises(TemplateSandboxError, match=f"{{% {tag} %}} is disabled") as info:
        ChatTemplate.from_messages("jinja2", system_message("s"), user_message(text))
    assert info.value.index == 1 and "must not read files" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "{{ ''.__class__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ x.__init__.__globals__ }}",
        "{{ cycler.__init__.__globals__.os }}",
        "{{ lipsum.__globals__ }}",
        "{{ x.append(1) }}",
        "{{ x.pop() }}",
        "{{ (x | first).__class__.__base__ }}",
    ],
)
async def test_jinja2_sandbox_refuses_attribute_tricks(text: str) -> None:
    template = ChatTemplate.from_messages("jinja2", user_message(text))
    values: dict[str, Any] = {"x": [1, 2]}
    with pytest.raises(TemplateSandboxError, match="unsafe") as info:
        await template.format(values)
    assert isinstance(info.value, TemplateFormatError)
    assert values == {"x": [1, 2]}


async def test_jinja2_sandbox_limits_ranges() -> None:
    template = ChatTemplate.from_messages("jinja2", user_message("{{ range(10 ** 9) | list | length }}"))
    with pytest.raises(TemplateFormatError, match="MAX_RANGE"):
        await template.format({})


def test_jinja2_is_imported_only_when_a_jinja2_template_is_built() -> None:
    code = """
import sys
from compose import ChatTemplate, user_message
ChatTemplate.from_messages("f-string", user_message("{x}"))
print("jinja2" in sys.modules)
ChatTemplate.from_messages("jinja2", user_message("{{ x }}"))
print("jinja2" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


# ------------------------------------------------------------------------------------------------------------
# the graph node


class Recorder(CallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, Any]] = []

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        self.seen.append(("start", run_info.name, run_info.component, input))

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        self.seen.append(("end", run_info.name, run_info.component, output))


def _graph(model: ScriptedChatModel) -> Graph[dict[str, Any], Message]:
    template = ChatTemplate.from_messages(
        "f-string",
        system_message("You plan trips to {city}."),
        MessagesPlaceholder("history", optional=True),
        user_message("{question}"),
    )
    g = Graph[dict[str, Any], Message]()
    g.add_chat_template_node("prompt", template)
    g.add_chat_model_node("model", model)
    g.add_edge(START, "prompt")
    g.add_edge("prompt", "model")
    g.add_edge("model", END)
    return g


async def test_graph_template_then_chat_model() -> None:
    model = ScriptedChatModel(["Go to West Lake.", "Try Longjing tea."])
    r = _graph(model).compile()
    variables = {"city": "Hangzhou", "question": "What to see?"}
    recorder = Recorder()
    assert (await r.invoke(variables, callbacks=[recorder])).content == "Go to West Lake."
    expected = [system_message("You plan trips to Hangzhou."), user_message("What to see?")]
    assert model.calls[0].messages == expected
    prompt_events = [e for e in recorder.seen if e[1] == "prompt"]
    templates = r.graph_info().node("prompt").instance.templates
    assert prompt_events == [  # Eino's prompt callback input and output (issue 28)
        ("start", "prompt", "ChatTemplate", PromptCallbackInput(variables, templates)),
        ("end", "prompt", "ChatTemplate", PromptCallbackOutput(expected, templates)),
    ]

    out = await concat(await r.stream({**variables, "question": "And to drink?"}))
    assert out.content == "Try Longjing tea."
    assert model.calls[1].messages[-1] == user_message("And to drink?")


async def test_graph_template_error_is_a_node_error() -> None:
    r = _graph(ScriptedChatModel(["unused"])).compile()
    with pytest.raises(NodeRunError) as info:
        await r.invoke({"question": "q"})
    assert isinstance(info.value.__cause__, TemplateFormatError) and info.value.__cause__.key == "city"


def test_graph_template_node_types() -> None:
    from compose import GraphBuildError, TypeMismatchError

    g = Graph[str, Message]()
    with pytest.raises(GraphBuildError, match="needs an async format"):
        g.add_chat_template_node("prompt", object())
    g.add_chat_template_node("prompt", ChatTemplate.from_messages("f-string"))
    with pytest.raises(TypeMismatchError):
        g.add_edge(START, "prompt")


def test_jinja2_environment_loads_no_template_by_name() -> None:
    from compose.prompt._formats import _environment

    with pytest.raises(TemplateSandboxError, match="must not read files"):
        _environment().get_template("secrets.txt")
