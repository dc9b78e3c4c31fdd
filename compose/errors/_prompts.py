"""Errors of chat templates (``compose.prompt``)."""

from __future__ import annotations

from compose.errors._base import ComposeError

__all__ = ["MessagesPlaceholderError", "PromptError", "TemplateFormatError", "TemplateSandboxError"]


class PromptError(ComposeError, ValueError):
    """A chat template (``compose.prompt``) cannot produce its messages."""


class TemplateFormatError(PromptError):
    """A template's content cannot be rendered with the variables: a syntax error (a lone ``{`` in an f-string,
    an unclosed Jinja2 tag), a placeholder naming no variable, a field or format spec the value does not have.
    Raised when the template is built for what the text alone shows, else when it is formatted.

    Attributes:
        problem: what is wrong, without the location.
        key: the variable (or field) at fault, when there is one.
        index: the position of the template message among the chat template's templates, when known.
    """

    def __init__(self, problem: str, *, key: str | None = None, index: int | None = None) -> None:
        where = f"chat template message {index}: " if index is not None else ""
        super().__init__(f"{where}{problem}")
        self.problem = problem
        self.key = key
        self.index = index

    def at(self, index: int) -> TemplateFormatError:
        """The same error, located at template message ``index``."""
        located = type(self)(self.problem, key=self.key, index=index)
        located.__cause__ = self.__cause__
        return located


class TemplateSandboxError(TemplateFormatError):
    """A Jinja2 template tried what its sandbox forbids: ``{% include %}``, ``{% import %}``, ``{% from %}`` or
    ``{% extends %}`` (a template must not read files) or an unsafe attribute such as ``__class__`` (it must not
    run code)."""


class MessagesPlaceholderError(PromptError):
    """A ``MessagesPlaceholder``'s variable is missing (and the placeholder is not optional) or its value is not
    a list of ``Message``.

    Attributes:
        key: the placeholder's variable.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key
