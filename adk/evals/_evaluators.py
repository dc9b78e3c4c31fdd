"""Cases and evaluators: what a case's run is scored on, and the context they score.

An evaluator's ``evaluate(ctx)`` (sync or async) returns a ``bool`` (passes when true), a ``float`` score (passes
when at least the evaluator's ``threshold``) or an :class:`EvaluationResult` carrying either with a reason.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from adk.errors import DatasetError
from compose.schema import Message

__all__ = [
    "BUILTIN_EVALUATORS",
    "Case",
    "Contains",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "ExactMatch",
    "ExpectedToolCall",
    "MatchesSchema",
    "MaxDuration",
    "MaxTokens",
    "ToolCallRecord",
    "TrajectoryMatch",
]


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call of a run's trajectory: the tool's name and its arguments (parsed JSON, else the raw text)."""

    name: str
    arguments: Any = None


@dataclass(frozen=True, slots=True)
class ExpectedToolCall:
    """A tool call a case expects: the tool's name and, optionally, its arguments (None: any arguments)."""

    name: str
    arguments: Any = None

    @classmethod
    def of(cls, value: Any, where: str) -> ExpectedToolCall:
        """From a name, a ``{"name": ..., "arguments": {...}}`` mapping, or an ``ExpectedToolCall``."""
        if isinstance(value, ExpectedToolCall):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping) and isinstance(value.get("name"), str) and set(value) <= {"name", "arguments"}:
            return cls(value["name"], value.get("arguments"))
        raise DatasetError(f"{where}: an expected tool call is a tool name or {{name, arguments}}, got {value!r}")

    def to_data(self) -> Any:
        return self.name if self.arguments is None else {"name": self.name, "arguments": self.arguments}


@dataclass
class Case:
    """One case: a name, the input (a text, or a list of messages, for an agent; anything a graph takes), what is
    expected, metadata, and evaluators of its own (run after the dataset's).

    ``expected_tool_calls`` lists tool names, or ``{"name": ..., "arguments": {...}}`` mappings (arguments
    compared by ``TrajectoryMatch(check_args=True)``).
    """

    name: str
    input: Any
    expected_output: Any = None
    expected_tool_calls: list[ExpectedToolCall] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    evaluators: list[Evaluator] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DatasetError(f"a case needs a non-empty name, got {self.name!r}")
        where = f"case '{self.name}'"
        calls: Any = self.expected_tool_calls
        if calls is not None:
            if isinstance(calls, str | bytes) or not isinstance(calls, Sequence):
                raise DatasetError(f"{where}: expected_tool_calls must be a list, got {calls!r}")
            self.expected_tool_calls = [ExpectedToolCall.of(c, where) for c in calls]
        if not isinstance(self.metadata, Mapping):
            raise DatasetError(f"{where}: metadata must be a mapping, got {type(self.metadata).__qualname__}")
        self.metadata = dict(self.metadata)
        self.evaluators = check_evaluators(self.evaluators, where)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "input": _input_data(self.input)}
        if self.expected_output is not None:
            data["expected_output"] = self.expected_output
        if self.expected_tool_calls is not None:
            data["expected_tool_calls"] = [c.to_data() for c in self.expected_tool_calls]
        if self.metadata:
            data["metadata"] = self.metadata
        if self.evaluators:
            data["evaluators"] = [e.to_data() for e in self.evaluators]
        return data


def _input_data(value: Any) -> Any:
    if isinstance(value, list):
        return [m.model_dump(mode="json", exclude_defaults=True) if hasattr(m, "model_dump") else m for m in value]
    return value


@dataclass(slots=True)
class EvaluatorContext:
    """What an evaluator sees of one run of one case.

    Attributes:
        case: the case (its ``name``, ``input``, ``expected_output``, ``expected_tool_calls``, ``metadata``).
        output: the answer: an agent's final message text (or its structured output, for an agent with an
            ``output_type``), a graph's output (a message's text).
        tool_calls: the run's tool calls, in the order the model made them.
        duration: seconds the run took.
        tokens: total tokens the run's model calls used.
        messages: the run's messages (model answers and tool results), in event order.
    """

    case: Case
    output: Any
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    duration: float = 0.0
    tokens: int = 0
    messages: list[Message] = field(default_factory=list)

    @property
    def expected_output(self) -> Any:
        return self.case.expected_output

    @property
    def expected_tool_calls(self) -> list[ExpectedToolCall] | None:
        return self.case.expected_tool_calls


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """A result with its reason: ``value`` is a ``bool`` (pass/fail) or a ``float`` score."""

    value: bool | float
    reason: str | None = None


BUILTIN_EVALUATORS: dict[str, type[Evaluator]] = {}
"""The built-in evaluator types by class name, as a dataset file names them: each subclass whose own body sets
``builtin = True`` is entered here as it is defined (``LLMJudge`` when ``adk.evals`` imports it)."""


class Evaluator:
    """Base of evaluators: override :meth:`evaluate`. ``threshold`` is the lowest passing score (1.0 by default);
    ``name`` (default: the class name) labels its column in reports.

    A subclass that is a dataclass is saved in a dataset file with its fields (``{"type": "module:Class",
    ...}``); a built-in one by its class name.

    Example::

        @dataclass
        class Polite(Evaluator):
            def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
                ok = "please" in str(ctx.output).lower()
                return EvaluationResult(ok, None if ok else "no 'please'")
    """

    threshold: float = 1.0
    name: str | None = None
    builtin: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("builtin", False):
            BUILTIN_EVALUATORS[cls.__name__] = cls

    def evaluate(self, ctx: EvaluatorContext) -> bool | float | EvaluationResult | Awaitable[Any]:
        """Score one run (sync or async)."""
        raise NotImplementedError(f"{type(self).__qualname__}.evaluate")

    @property
    def label(self) -> str:
        """The evaluator's name in reports."""
        return self.name or type(self).__name__

    def to_data(self) -> dict[str, Any]:
        """The evaluator in a dataset file: its type and the fields that differ from their defaults."""
        cls = type(self)
        kind = cls.__name__ if cls.__dict__.get("builtin", False) else f"{cls.__module__}:{cls.__qualname__}"
        data: dict[str, Any] = {"type": kind}
        fields: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(self) if dataclasses.is_dataclass(self) else ()
        if fields:
            for f in fields:
                value = getattr(self, f.name)
                default = f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING
                if f.default_factory is not dataclasses.MISSING:
                    default = f.default_factory()
                if value != default:
                    data[f.name] = self._field_data(f.name, value)
        return data

    def _field_data(self, name: str, value: Any) -> Any:
        return value


# ---------------------------------------------------------------------------------------------------------------
# Built-in evaluators


def _text(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


@dataclass
class ExactMatch(Evaluator):
    """The output equals ``expected`` (default: the case's ``expected_output``); a structured output is compared
    as its JSON data. ``strip`` ignores surrounding whitespace of text."""

    expected: Any = None
    strip: bool = True
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        expected = _plain(self.expected if self.expected is not None else ctx.expected_output)
        output = _plain(ctx.output)
        if self.strip and isinstance(output, str) and isinstance(expected, str):
            output, expected = output.strip(), expected.strip()
        if output == expected:
            return EvaluationResult(True)
        return EvaluationResult(False, f"expected {_short(expected)}, got {_short(output)}")


@dataclass
class Contains(Evaluator):
    """The output's text contains ``value`` (default: the case's ``expected_output``), or every one of a list."""

    value: str | list[str] | None = None
    case_sensitive: bool = True
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        wanted = self.value if self.value is not None else ctx.expected_output
        if wanted is None:
            raise DatasetError(f"case '{ctx.case.name}': Contains has no value and the case no expected_output")
        parts = [wanted] if isinstance(wanted, str) else [str(w) for w in wanted]
        text = _text(ctx.output) if ctx.output is not None else ""
        if not self.case_sensitive:
            text = text.lower()
        missing = [p for p in parts if (p if self.case_sensitive else p.lower()) not in text]
        if missing:
            return EvaluationResult(False, f"missing {', '.join(repr(m) for m in missing)} in {_short(text)}")
        return EvaluationResult(True)


@dataclass
class MatchesSchema(Evaluator):
    """The output (its JSON, for text) is valid against ``schema``: a JSON schema (a dict; needs ``jsonschema``)
    or a type pydantic validates (a model class, a dataclass, ``list[int]``...)."""

    schema: Any = None
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        if self.schema is None:
            raise DatasetError("MatchesSchema needs a schema")
        value = ctx.output
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                return EvaluationResult(False, f"the output is not JSON: {exc}")
        value = _plain(value)
        if isinstance(self.schema, dict):
            import jsonschema

            errors = sorted(jsonschema.Draft202012Validator(self.schema).iter_errors(value), key=lambda e: e.path)
            if errors:
                where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
                return EvaluationResult(False, f"at {where}: {errors[0].message}")
            return EvaluationResult(True)
        try:
            TypeAdapter(self.schema).validate_python(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            return EvaluationResult(False, f"at {where}: {first['msg']}")
        return EvaluationResult(True)

    def _field_data(self, name: str, value: Any) -> Any:
        if name == "schema" and not isinstance(value, dict):
            if isinstance(value, type) and issubclass(value, BaseModel):
                return value.model_json_schema()
            raise DatasetError(f"MatchesSchema: a schema of type {value!r} cannot be saved; give a JSON schema dict")
        return value


TrajectoryMode = Literal["exact", "in_order", "any_order"]


@dataclass
class TrajectoryMatch(Evaluator):
    """The run's tool calls against the case's ``expected_tool_calls`` (ADK's trajectory metrics).

    ``mode``: ``"exact"`` (the same calls in the same order, nothing else), ``"in_order"`` (the expected calls
    appear in this order, other calls may come between) or ``"any_order"`` (each expected call appears, in any
    order, other calls allowed). ``check_args`` compares arguments too, where an expected call gives them.
    """

    mode: TrajectoryMode = "exact"
    check_args: bool = True
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "in_order", "any_order"):
            raise DatasetError(f"TrajectoryMatch mode must be 'exact', 'in_order' or 'any_order', got {self.mode!r}")

    def _matches(self, expected: ExpectedToolCall, actual: ToolCallRecord) -> bool:
        if expected.name != actual.name:
            return False
        return not self.check_args or expected.arguments is None or _plain(expected.arguments) == actual.arguments

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        expected = ctx.expected_tool_calls
        if expected is None:
            raise DatasetError(f"case '{ctx.case.name}': TrajectoryMatch needs the case's expected_tool_calls")
        actual = ctx.tool_calls
        names = [c.name for c in actual]
        if self.mode == "exact":
            if len(expected) != len(actual):
                return EvaluationResult(False, f"expected {len(expected)} tool calls, got {len(actual)}: {names}")
            for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
                if not self._matches(e, a):
                    return EvaluationResult(False, f"call {i}: expected {_call(e)}, got {_call(a)}")
            return EvaluationResult(True)
        if self.mode == "in_order":
            pos = 0
            for e in expected:
                while pos < len(actual) and not self._matches(e, actual[pos]):
                    pos += 1
                if pos == len(actual):
                    return EvaluationResult(False, f"{_call(e)} not found in order in {names}")
                pos += 1
            return EvaluationResult(True)
        left = list(actual)
        for e in expected:
            hit = next((i for i, a in enumerate(left) if self._matches(e, a)), None)
            if hit is None:
                return EvaluationResult(False, f"{_call(e)} not found in {names}")
            del left[hit]
        return EvaluationResult(True)


@dataclass
class MaxDuration(Evaluator):
    """The run took at most ``seconds``."""

    seconds: float = 60.0
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        ok = ctx.duration <= self.seconds
        return EvaluationResult(ok, None if ok else f"took {ctx.duration:.3f}s, more than {self.seconds}s")


@dataclass
class MaxTokens(Evaluator):
    """The run's model calls used at most ``tokens`` tokens in total."""

    tokens: int = 10_000
    threshold: float = field(default=1.0, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        ok = ctx.tokens <= self.tokens
        return EvaluationResult(ok, None if ok else f"used {ctx.tokens} tokens, more than {self.tokens}")


def _call(c: ExpectedToolCall | ToolCallRecord) -> str:
    if c.arguments is None:
        return c.name
    return f"{c.name}({json.dumps(_plain(c.arguments), ensure_ascii=False, sort_keys=True)})"


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_evaluators(evaluators: Sequence[Any], where: str) -> list[Evaluator]:
    """``evaluators`` as a list, or a ``DatasetError`` naming ``where`` and the item that is not an Evaluator."""
    out = []
    for i, e in enumerate(evaluators):
        if not isinstance(e, Evaluator):
            raise DatasetError(f"{where}: evaluators[{i}] is {type(e).__qualname__}, not an Evaluator")
        out.append(e)
    return out
