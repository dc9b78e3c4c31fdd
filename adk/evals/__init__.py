"""Evaluating agents: datasets of cases, evaluators, reports (table, JSON, HTML), and a CLI for CI.

A :class:`Dataset` holds :class:`Case`\\ s (a name, the input, the expected output and tool calls, metadata) and
the evaluators every case is scored by. ``await dataset.evaluate(agent)`` runs each case (on a Runner; a
``Runner`` or a compiled graph works too), ``repeat`` times, ``concurrency`` at once, optionally on a
``compose.testing`` cassette, and returns an :class:`EvaluationReport`.

Evaluators return a ``bool`` (passes when true), a ``float`` score (passes at its ``threshold``, 1.0 by default)
or an :class:`EvaluationResult` with a reason; one that raises fails its case with the error as the reason. Built
in: :class:`ExactMatch`, :class:`Contains`, :class:`MatchesSchema`, :class:`TrajectoryMatch` (``exact``,
``in_order``, ``any_order``; ``check_args``), :class:`LLMJudge` (a structured verdict; threshold 0.5),
:class:`MaxDuration`, :class:`MaxTokens`; subclass :class:`Evaluator` for your own. A case passes when every
evaluator's mean score over its runs reaches the threshold and no run failed; the dataset passes when its pass
rate reaches ``min_pass_rate`` (1.0 by default).

Datasets load from and save to YAML (PyYAML, the ``evals`` extra) or JSON: evaluators by type and arguments, an
``LLMJudge``'s model named ``module:attr``. From a shell (exit status 0: passed, 1: failed, 2: usage error)::

    python -m adk.evals run dataset.yaml myapp.agents:build --concurrency 4 --html report.html

Example::

    dataset = Dataset.from_file("evals/trips.yaml")
    report = await dataset.evaluate(build_agent, cassette=cassette("evals/trips.cassette.json", "none"))
    report.print()
    assert report.passed
"""

from adk.errors import DatasetError
from adk.evals._dataset import Dataset
from adk.evals._evaluators import (
    BUILTIN_EVALUATORS,
    Case,
    Contains,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    ExactMatch,
    ExpectedToolCall,
    MatchesSchema,
    MaxDuration,
    MaxTokens,
    ToolCallRecord,
    TrajectoryMatch,
)
from adk.evals._judge import JudgeVerdict, LLMJudge
from adk.evals._report import CaseResult, EvaluationReport, ReportComparison, RunResult, Score

__all__ = [
    "BUILTIN_EVALUATORS",
    "Case",
    "CaseResult",
    "Contains",
    "Dataset",
    "DatasetError",
    "EvaluationReport",
    "EvaluationResult",
    "Evaluator",
    "EvaluatorContext",
    "ExactMatch",
    "ExpectedToolCall",
    "JudgeVerdict",
    "LLMJudge",
    "MatchesSchema",
    "MaxDuration",
    "MaxTokens",
    "ReportComparison",
    "RunResult",
    "Score",
    "ToolCallRecord",
    "TrajectoryMatch",
]
