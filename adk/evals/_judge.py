"""LLMJudge: a chat model grades the output against a rubric, answering with a structured verdict."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from adk.errors import DatasetError
from adk.evals._evaluators import EvaluationResult, Evaluator, EvaluatorContext, _text
from compose.models.base import ChatModel

__all__ = ["JudgeVerdict", "LLMJudge", "resolve_model"]

_JUDGE_INSTRUCTION = (
    "You grade the answer of an AI assistant against a rubric. Read the task, the expected answer if there is one, "
    "and the answer; then give a score between 0 (fails the rubric) and 1 (fully meets it), whether it passes, and "
    "a one-sentence reason."
)


class JudgeVerdict(BaseModel):
    """The judge's structured answer."""

    score: float = Field(ge=0.0, le=1.0, description="0 = fails the rubric, 1 = fully meets it")
    passed: bool = Field(description="whether the answer meets the rubric")
    reason: str = Field(description="one sentence saying why")


def resolve_model(ref: str, where: str) -> ChatModel:
    """The chat model named ``module:attr``: the attribute itself, or what calling it returns.

    Raises:
        DatasetError: the name is malformed, cannot be imported, or does not give a chat model.
    """
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise DatasetError(f"{where}: a model is named 'module:attr', got {ref!r}")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise DatasetError(f"{where}: cannot import {ref!r}: {exc}") from None
    if not callable(getattr(value, "generate", None)) and callable(value):
        value = value()
    if not (callable(getattr(value, "generate", None)) and callable(getattr(value, "stream", None))):
        raise DatasetError(f"{where}: {ref!r} is not a chat model (nor a function returning one): {value!r}")
    return value  # type: ignore[no-any-return]


@dataclass
class LLMJudge(Evaluator):
    """``model`` grades the output against ``rubric``; the score is the verdict's (passes at ``threshold``, 0.5).

    The judge runs as a one-shot ``ChatModelAgent`` with ``output=OutputConfig(JudgeVerdict)``, so the verdict is
    structured output (a native ``response_format`` on models that support it, else a ``final_answer`` tool call).
    ``model`` is a chat model, or its name as ``module:attr`` (a model or a function returning one; how a dataset
    file names it), resolved on first use.
    """

    rubric: str = ""
    model: ChatModel | str | None = None
    include_expected: bool = True
    threshold: float = field(default=0.5, kw_only=True)
    name: str | None = field(default=None, kw_only=True)
    builtin: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not self.rubric:
            raise DatasetError("LLMJudge needs a rubric")
        if self.model is None:
            raise DatasetError("LLMJudge needs a model (a chat model, or 'module:attr')")
        self._agent: Any = None

    def _judge(self) -> Any:
        if self._agent is None:
            from adk.chat_model.agent import ChatModelAgent, OutputConfig

            model = resolve_model(self.model, "LLMJudge") if isinstance(self.model, str) else self.model
            assert model is not None
            self._agent = ChatModelAgent(
                "judge",
                "grades answers",
                _JUDGE_INSTRUCTION,
                model,
                output=OutputConfig(JudgeVerdict),
                max_iterations=4,
            )
        return self._agent

    async def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
        from adk.runner import Runner

        case = ctx.case
        parts = [f"Rubric: {self.rubric}", f"Task: {_text(case.input)}"]
        if self.include_expected and case.expected_output is not None:
            parts.append(f"Expected answer: {_text(case.expected_output)}")
        parts.append(f"Answer: {_text(ctx.output) if ctx.output is not None else '(none)'}")
        verdict: JudgeVerdict | None = None
        async with Runner(self._judge()).query("\n\n".join(parts)) as run:
            async for event in run:
                if event.error is not None:
                    raise event.error
                if event.output is not None and isinstance(event.output.structured, JudgeVerdict):
                    verdict = event.output.structured
                elif event.message is not None:
                    await event.message.get_message()
        if verdict is None:
            raise DatasetError("LLMJudge: the judge gave no verdict")
        return EvaluationResult(verdict.score, verdict.reason)

    def _field_data(self, name: str, value: Any) -> Any:
        if name == "model" and not isinstance(value, str):
            raise DatasetError(
                "LLMJudge: a model object cannot be saved in a dataset file; name it as 'module:attr' "
                f"(got {type(value).__qualname__})"
            )
        return value
