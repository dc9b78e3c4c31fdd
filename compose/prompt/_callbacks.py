"""What callback handlers see of a chat template node (Eino's ``prompt.CallbackInput`` / ``CallbackOutput``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compose.schema import Message

__all__ = ["PromptCallbackInput", "PromptCallbackOutput", "prompt_report"]


@dataclass(frozen=True, slots=True)
class PromptCallbackInput:
    """A chat template node's ``on_start`` input: the ``variables`` it formats and its ``templates`` (the
    messages and placeholders it is made of; empty for a template object without a ``templates`` attribute)."""

    variables: Mapping[str, Any]
    templates: tuple[Any, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PromptCallbackOutput:
    """A chat template node's ``on_end`` output: the formatted messages (``result``) and its ``templates``."""

    result: list[Message]
    templates: tuple[Any, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


def prompt_report(template: Any) -> tuple[Callable[[Any], Any], Callable[[Any, Any], Any]]:
    """The ``Paradigms.report`` of a chat template node: callback input and output built from ``template``."""

    def templates() -> tuple[Any, ...]:
        found = getattr(template, "templates", ())
        return tuple(found) if isinstance(found, list | tuple) else ()

    def start(variables: Any) -> PromptCallbackInput:
        return PromptCallbackInput(variables, templates())

    def end(variables: Any, messages: Any) -> PromptCallbackOutput:
        return PromptCallbackOutput(messages, templates())

    return start, end
