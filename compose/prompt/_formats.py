"""The two template languages of a chat template's content: Python f-strings (Eino's ``FString``, through pyfmt)
and Jinja2 in a sandbox (Eino's ``Jinja2``, through gonja). Eino's ``GoTemplate`` has no counterpart.

Each format compiles a text once (:func:`compile_text`, where what the text alone shows is checked) into a
renderer called with the variables. jinja2 is imported only when a Jinja2 text is compiled.

Example::

    >>> compile_text("Hello {name}!", FormatType.F_STRING)({"name": "Eino"})
    'Hello Eino!'
"""

from __future__ import annotations

import enum
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compose.errors import TemplateFormatError, TemplateSandboxError

if TYPE_CHECKING:
    import jinja2

__all__ = ["FormatType", "Renderer", "compile_text", "format_fstring"]

Renderer = Callable[[Mapping[str, Any]], str]
"""A compiled text: the variables in, the rendered text out (raises :class:`TemplateFormatError`)."""


class FormatType(enum.StrEnum):
    """How a chat template's contents are rendered (Eino's ``schema.FormatType``).

    Eino's ``GoTemplate`` (Go's ``text/template``) is not supported: it has no Python implementation.
    """

    F_STRING = "f-string"
    """PEP 3101 ``str.format`` rules with the variables as names: ``{key}``, ``{key.field}``, ``{key[0]}``,
    ``{key:spec}``, ``{{``/``}}`` for literal braces (Eino's ``FString``, pyfmt)."""

    JINJA2 = "jinja2"
    """Jinja2 in an immutable sandbox, with ``{% include %}``, ``{% import %}``, ``{% from %}`` and
    ``{% extends %}`` disabled and undefined variables an error (Eino's ``Jinja2``, gonja)."""


def compile_text(text: str, format_type: FormatType) -> Renderer:
    """Compile ``text`` in ``format_type``; raises :class:`TemplateFormatError` for a malformed text and
    :class:`TemplateSandboxError` for a Jinja2 text using a disabled tag."""
    if format_type is FormatType.JINJA2:
        return _compile_jinja(text)
    return _FString(_parse_fstring(text, "variable"), "variable")


def format_fstring(text: str, values: Mapping[str, Any], *, noun: str = "variable") -> str:
    """Render the f-string ``text`` with ``values`` in one go; ``noun`` names the values in errors (the agent's
    instruction says "session value")."""
    return _FString(_parse_fstring(text, noun), noun)(values)


# ------------------------------------------------------------------------------------------------------------
# f-strings (pyfmt's rules: PEP 3101 with one mapping argument)


@dataclass(frozen=True, slots=True)
class _Field:
    source: str  # the placeholder as written, for errors: "{a.b:>4}"
    name: str  # its field name: "a.b"
    first: str
    rest: tuple[str, ...]
    spec: str


@dataclass(frozen=True, slots=True)
class _FString:
    pieces: tuple[str | _Field, ...]
    noun: str

    def __call__(self, values: Mapping[str, Any]) -> str:
        return "".join(p if isinstance(p, str) else _render_field(p, values, self.noun) for p in self.pieces)


def _parse_fstring(text: str, noun: str) -> tuple[str | _Field, ...]:
    pieces: list[str | _Field] = []
    try:
        # Formatter.parse is PEP 3101's own scanner: the same brace rules and errors as pyfmt's doFormat.
        parsed = list(string.Formatter().parse(text))
    except ValueError as error:
        raise TemplateFormatError(str(error)) from error
    for literal, field_name, spec, conversion in parsed:
        if literal:
            pieces.append(literal)
        if field_name is None:
            continue
        first, rest = _split_field_name(field_name)
        if first == "" or first.isdigit():
            raise TemplateFormatError(
                f"the positional placeholder {{{field_name}}} has no value (name a {noun}: {{key}})"
            )
        if conversion is not None:
            raise TemplateFormatError(
                f"the conversion !{conversion} in {{{field_name}!{conversion}}} is not supported", key=field_name
            )
        spec = spec or ""
        if "{" in spec or "}" in spec:
            raise TemplateFormatError(f"the format spec of {{{field_name}:{spec}}} contains a brace", key=field_name)
        source = f"{{{field_name}:{spec}}}" if spec else f"{{{field_name}}}"
        pieces.append(_Field(source, field_name, first, tuple(rest), spec))
    return tuple(pieces)


def _render_field(f: _Field, values: Mapping[str, Any], noun: str) -> str:
    if f.first not in values:
        known = ", ".join(sorted(map(str, values)))
        raise TemplateFormatError(
            f"the placeholder {f.source} names no {noun} {f.first!r} ({noun}s: {known})", key=f.first
        )
    value = values[f.first]
    for part in f.rest:
        value = _lookup(value, part, f)
    try:
        return format(value, f.spec)
    except (ValueError, TypeError) as error:
        raise TemplateFormatError(
            f"cannot format {f.source} ({type(value).__qualname__}): {error}", key=f.name
        ) from error


_SUBFIELD = re.compile(r"\.([^.\[]+)|\[([^\]]+)\]")


def _split_field_name(field_name: str) -> tuple[str, list[str]]:
    """``a.b[0]`` -> ``("a", ["b", "0"])``; both ``.x`` and ``[x]`` look up ``x`` (pyfmt's ``splitName``)."""
    end = len(field_name)
    for i, c in enumerate(field_name):
        if c in ".[":
            end = i
            break
    parts: list[str] = []
    pos = end
    while pos < len(field_name):
        match = _SUBFIELD.match(field_name, pos)
        if match is None:
            raise TemplateFormatError(
                f"cannot read the field name {{{field_name}}} (write {{key.field}} or {{key[field]}})", key=field_name
            )
        parts.append(match.group(1) if match.group(1) is not None else match.group(2))
        pos = match.end()
    return field_name[:end], parts


def _lookup(value: Any, part: str, f: _Field) -> Any:
    """pyfmt's ``elementByName``: a mapping by key, a sequence by index, otherwise a public attribute."""
    if isinstance(value, Mapping):
        if part in value:
            return value[part]
    elif isinstance(value, Sequence) and not isinstance(value, str) and part.isdigit():
        if int(part) < len(value):
            return value[int(part)]
    elif not part.startswith("_") and hasattr(value, part):
        return getattr(value, part)
    raise TemplateFormatError(
        f"the placeholder {f.source}: {type(value).__qualname__} value has no {part!r}", key=f.name
    )


# ------------------------------------------------------------------------------------------------------------
# Jinja2 (sandboxed)

_DISABLED_TAGS = {"Include": "include", "Import": "import", "FromImport": "from", "Extends": "extends"}
_jinja_env: jinja2.Environment | None = None


def _environment() -> jinja2.Environment:
    global _jinja_env
    if _jinja_env is None:
        try:
            import jinja2
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError as error:  # pragma: no cover - the extra is installed in the test environment
            raise TemplateFormatError(
                "Jinja2 templates need the jinja2 package: pip install 'pyeino[jinja]'"
            ) from error

        class _Sandbox(ImmutableSandboxedEnvironment):
            # no loader: nothing could be read anyway; this names the reason should a load ever be attempted
            def _load_template(self, name: Any, globals: Any) -> Any:
                raise TemplateSandboxError(f"the template tried to load {name!r}: templates must not read files")

        # immutable: a template cannot change the caller's lists and dicts; StrictUndefined: a missing
        # variable (or an unsafe attribute, which the sandbox turns into an undefined) fails instead of ''
        _jinja_env = _Sandbox(
            loader=None, autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True
        )
    return _jinja_env


def _compile_jinja(text: str) -> Renderer:
    import jinja2
    from jinja2 import nodes
    from jinja2.exceptions import SecurityError

    env = _environment()
    try:
        tree = env.parse(text)
    except jinja2.TemplateSyntaxError as error:
        raise TemplateFormatError(f"Jinja2 syntax error on line {error.lineno}: {error.message}") from error
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        tag = _DISABLED_TAGS[type(node).__name__]
        raise TemplateSandboxError(
            f"{{% {tag} %}} is disabled (line {node.lineno}): a template must not read files; pass the text "
            "as a variable instead"
        )
    template = env.from_string(tree)

    def render(values: Mapping[str, Any]) -> str:
        try:
            return template.render(values)
        except SecurityError as error:
            raise TemplateSandboxError(f"the Jinja2 sandbox refused: {error}") from error
        except jinja2.UndefinedError as error:
            key = _undefined_name(str(error))
            raise TemplateFormatError(f"Jinja2: {error}", key=key) from error
        except (jinja2.TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as error:
            raise TemplateFormatError(f"Jinja2: {type(error).__name__}: {error}") from error

    return render


def _undefined_name(message: str) -> str | None:
    """The variable of jinja2's "'name' is undefined" message, when that is the message."""
    match = re.fullmatch(r"'([^']+)' is undefined", message)
    return match.group(1) if match else None
