"""``ChatTemplate``: a list of message templates rendered with variables into the messages a chat model takes
(Eino's ``prompt.DefaultChatTemplate``, ``schema.Message.Format`` and ``schema.MessagesPlaceholder``).

Example::

    template = ChatTemplate.from_messages(
        FormatType.F_STRING,
        system_message("You are a {role}."),
        MessagesPlaceholder("history", optional=True),
        user_message("Question: {question}"),
    )
    messages = await template.format({"role": "travel agent", "question": "Where to go?", "history": []})

A message's ``content`` and the text of its text parts (``TextPart``) are templates; its other parts (images,
files, ...) are copied as they are.

Where pyeino differs from Eino: no Go templates; only text is rendered, not the URLs of media parts; a content
is compiled when the template is built, so a malformed one (or a disabled Jinja2 tag) fails
there rather than at ``format``; an undefined Jinja2 variable is an error, not an empty string; the messages
returned are deep copies of the templates (Eino's are shallow); ``format`` fires no callbacks of its own (a
chat template node's callbacks come from the graph, with Eino's callback input and output:
:class:`~compose.prompt.PromptCallbackInput` (the variables and the templates) to ``on_start``,
:class:`~compose.prompt.PromptCallbackOutput` (the messages and the templates) to ``on_end``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from compose.errors import MessagesPlaceholderError, TemplateFormatError
from compose.prompt._formats import FormatType, Renderer, compile_text
from compose.schema import Message, TextPart

__all__ = ["ChatTemplate", "MessagesPlaceholder", "MessagesTemplate"]


@runtime_checkable
class MessagesTemplate(Protocol):
    """What a chat template is made of besides ``Message``s (Eino's ``schema.MessagesTemplate``): something that
    renders the variables into zero or more messages. :class:`MessagesPlaceholder` is one."""

    def format_messages(self, variables: Mapping[str, Any], format_type: FormatType) -> list[Message]:
        """The messages for ``variables``; raise a :class:`~compose.errors.PromptError` when they cannot be had."""
        ...


class MessagesPlaceholder:
    """A run of messages taken whole from a variable, e.g. the chat history (Eino's ``MessagesPlaceholder``).

    The variable's value must be a list of ``Message``; they are inserted as they are, not rendered.

    Args:
        key: the variable.
        optional: when the variable is missing, give no messages instead of failing.

    Example::

        ChatTemplate.from_messages("f-string", MessagesPlaceholder("history"), user_message("{question}"))
    """

    __slots__ = ("key", "optional")

    def __init__(self, key: str, *, optional: bool = False) -> None:
        self.key = key
        self.optional = optional

    def format_messages(self, variables: Mapping[str, Any], format_type: FormatType) -> list[Message]:
        """The messages of ``variables[key]``.

        Raises:
            MessagesPlaceholderError: the variable is missing and not optional, or it is not a list of Message.
        """
        if self.key not in variables:
            if self.optional:
                return []
            known = ", ".join(sorted(map(str, variables)))
            raise MessagesPlaceholderError(
                f"the messages placeholder {self.key!r} has no variable (variables: {known}); pass a list of "
                f"Message as {self.key!r}, or make the placeholder optional",
                key=self.key,
            )
        value = variables[self.key]
        if not isinstance(value, list) or not all(isinstance(m, Message) for m in value):
            got = type(value).__qualname__
            if isinstance(value, list):
                got += " of " + ", ".join(sorted({type(m).__qualname__ for m in value if not isinstance(m, Message)}))
            raise MessagesPlaceholderError(
                f"the messages placeholder {self.key!r} takes a list of Message, got {got}", key=self.key
            )
        return list(value)

    def __repr__(self) -> str:
        return f"MessagesPlaceholder({self.key!r}{', optional=True' if self.optional else ''})"


class _MessageTemplate:
    """A ``Message`` whose content and text parts are templates, compiled once."""

    __slots__ = ("message", "parts", "render")

    def __init__(self, message: Message, format_type: FormatType) -> None:
        self.message = message
        self.render: Renderer = compile_text(message.content, format_type)
        self.parts: tuple[tuple[int, Renderer], ...] = tuple(
            (n, _in_part(n, compile_text, part.text, format_type))
            for n, part in enumerate(message.parts)
            if isinstance(part, TextPart)
        )

    def format_messages(self, variables: Mapping[str, Any], format_type: FormatType) -> list[Message]:
        # deep: the result shares no tool call, part or extra dict with the template (or with an earlier result)
        out = self.message.model_copy(update={"content": self.render(variables)}, deep=True)
        for n, render in self.parts:
            part = out.parts[n]
            assert isinstance(part, TextPart)
            part.text = _in_part(n, render, variables)
        return [out]


def _in_part(n: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, a template error located at ``parts[n]``."""
    try:
        return fn(*args)
    except TemplateFormatError as error:
        raise type(error)(f"parts[{n}]: {error.problem}", key=error.key) from error


class ChatTemplate:
    """Messages rendered from variables: ``dict[str, Any] -> list[Message]`` (Eino's ``DefaultChatTemplate``).

    Each ``Message``'s ``content``, and the text of each of its text parts, is a template in the chat template's
    format; its role, name, tool calls, other parts and other fields are copied as they are. A
    :class:`MessagesPlaceholder` (or any :class:`MessagesTemplate`) contributes the messages it renders. Add it
    to a graph with ``Graph.add_chat_template_node``.

    Example::

        template = ChatTemplate.from_messages(
            "jinja2", system_message("You help {{ user }}."), MessagesPlaceholder("history", optional=True)
        )
        assert await template.format({"user": "Li"}) == [system_message("You help Li.")]
    """

    __slots__ = ("_format_type", "_parts", "_templates")

    def __init__(self, format_type: FormatType | str, templates: tuple[Message | MessagesTemplate, ...]) -> None:
        try:
            self._format_type = FormatType(format_type)
        except ValueError:
            raise ValueError(
                f"unknown template format {format_type!r}: use 'f-string' or 'jinja2' (Go templates are not supported)"
            ) from None
        self._templates = templates
        parts: list[MessagesTemplate] = []
        for i, t in enumerate(templates):
            if isinstance(t, Message):
                try:
                    parts.append(_MessageTemplate(t, self._format_type))
                except TemplateFormatError as error:
                    raise error.at(i) from error
            elif isinstance(t, MessagesTemplate):
                parts.append(t)
            else:
                raise TypeError(
                    f"chat template message {i}: {type(t).__qualname__} is neither a Message nor a MessagesTemplate "
                    "(such as MessagesPlaceholder)"
                )
        self._parts = tuple(parts)

    @classmethod
    def from_messages(cls, format_type: FormatType | str, *templates: Message | MessagesTemplate) -> ChatTemplate:
        """A chat template of ``templates`` in ``format_type`` (Eino's ``prompt.FromMessages``).

        Args:
            format_type: ``FormatType.F_STRING`` / ``"f-string"`` or ``FormatType.JINJA2`` / ``"jinja2"``.
            *templates: ``Message``s (their content is the template) and ``MessagesPlaceholder``s, in order.

        Raises:
            ValueError: an unknown format.
            TemplateFormatError: a content that is malformed whatever the variables (a lone ``{``, an unclosed
                Jinja2 tag); ``TemplateSandboxError`` for a disabled Jinja2 tag.
        """
        return cls(format_type, templates)

    @property
    def format_type(self) -> FormatType:
        """The format of the messages' contents."""
        return self._format_type

    @property
    def templates(self) -> tuple[Message | MessagesTemplate, ...]:
        """The templates, as given."""
        return self._templates

    async def format(self, variables: Mapping[str, Any]) -> list[Message]:
        """Render the templates with ``variables``, in order (Eino's ``Format(ctx, vs)``).

        Raises:
            TemplateFormatError: a content cannot be rendered (a placeholder naming no variable, ...), with the
                index of its template message; ``TemplateSandboxError`` when the Jinja2 sandbox refused.
            MessagesPlaceholderError: a placeholder's variable is missing or not a list of Message.
        """
        if not isinstance(variables, Mapping):
            raise TypeError(f"a chat template formats a dict of variables, got {type(variables).__qualname__}")
        out: list[Message] = []
        for i, part in enumerate(self._parts):
            try:
                out.extend(part.format_messages(variables, self._format_type))
            except TemplateFormatError as error:
                if error.index is not None:
                    raise
                raise error.at(i) from error
        return out

    def __repr__(self) -> str:
        kinds = ", ".join(t.role if isinstance(t, Message) else repr(t) for t in self._templates)
        return f"ChatTemplate({self._format_type.value!r}, [{kinds}])"
