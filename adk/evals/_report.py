"""The report of an evaluation: per case, each run's scores, output, trajectory, duration and tokens; pass rules;
printing (a rich table), JSON, HTML, and comparison with a baseline."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic_core import to_jsonable_python

from adk.evals._evaluators import ToolCallRecord

__all__ = ["CaseResult", "EvaluationReport", "ReportComparison", "RunResult", "Score"]


@dataclass(frozen=True, slots=True)
class Score:
    """One evaluator's result on one run: ``score`` in [0, 1] (a bool scores 1 or 0), ``passed`` by the rule
    (a bool when true; a score when at least the evaluator's threshold), and the ``reason`` given (or the error
    of an evaluator that raised)."""

    evaluator: str
    score: float
    passed: bool
    reason: str | None = None


@dataclass(slots=True)
class RunResult:
    """One run of a case: its output (JSON data) or error, trajectory, duration (seconds), tokens and scores."""

    output: Any
    error: str | None
    duration: float
    tokens: int
    tool_calls: list[ToolCallRecord]
    scores: list[Score]


@dataclass(slots=True)
class CaseResult:
    """A case's runs (``repeat`` of them) and what they add up to.

    A case passes when none of its runs failed and, for every evaluator, the mean of its scores over the runs is
    at least the evaluator's threshold.
    """

    name: str
    input: Any
    expected_output: Any
    metadata: dict[str, Any]
    runs: list[RunResult]
    thresholds: dict[str, float] = field(repr=False)

    @property
    def scores(self) -> dict[str, float]:
        """Each evaluator's mean score over the runs."""
        sums: dict[str, list[float]] = {}
        for run in self.runs:
            for s in run.scores:
                sums.setdefault(s.evaluator, []).append(s.score)
        return {name: sum(v) / len(v) for name, v in sums.items()}

    @property
    def error(self) -> str | None:
        """The first failed run's error."""
        return next((r.error for r in self.runs if r.error is not None), None)

    @property
    def passed(self) -> bool:
        if self.error is not None:
            return False
        return all(mean >= self.thresholds.get(name, 1.0) for name, mean in self.scores.items())

    @property
    def mean_score(self) -> float:
        """The mean of the evaluators' mean scores (0 for a case without evaluators that failed)."""
        scores = self.scores
        if not scores:
            return 0.0 if self.error is not None else 1.0
        return sum(scores.values()) / len(scores)

    @property
    def reasons(self) -> list[str]:
        """Why the case failed: the run error, then each failing evaluator's first reason."""
        out = [f"error: {self.error}"] if self.error is not None else []
        for name, mean in self.scores.items():
            if mean < self.thresholds.get(name, 1.0):
                reason = next((s.reason for r in self.runs for s in r.scores if s.evaluator == name and s.reason), None)
                out.append(f"{name}: {reason or f'score {mean:.2f}'}")
        return out

    @property
    def duration(self) -> float:
        """The mean duration of the runs (seconds)."""
        return sum(r.duration for r in self.runs) / len(self.runs) if self.runs else 0.0

    @property
    def tokens(self) -> float:
        """The mean tokens of the runs."""
        return sum(r.tokens for r in self.runs) / len(self.runs) if self.runs else 0.0


@dataclass(frozen=True, slots=True)
class ReportComparison:
    """Cases of a report against a baseline's (cases in both): better, worse or the same, by (passed, mean
    score); ``added`` and ``removed`` are cases in only one of them."""

    improved: list[str]
    regressed: list[str]
    unchanged: list[str]
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class EvaluationReport:
    """What ``Dataset.evaluate`` returns (see the module docstring).

    Attributes:
        name: the dataset's name.
        cases: one result per case, in the dataset's order.
        thresholds: each evaluator's name and threshold, in column order.
        min_pass_rate: the share of cases that must pass for the dataset to pass.
        repeat: runs per case.
    """

    name: str
    cases: list[CaseResult]
    thresholds: dict[str, float]
    min_pass_rate: float = 1.0
    repeat: int = 1

    @property
    def pass_rate(self) -> float:
        """The share of cases that passed (1.0 for no cases)."""
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 1.0

    @property
    def passed(self) -> bool:
        """Whether the pass rate is at least ``min_pass_rate``."""
        return self.pass_rate >= self.min_pass_rate

    @property
    def evaluator_means(self) -> dict[str, float]:
        """Each evaluator's mean score over the cases that ran it."""
        out: dict[str, float] = {}
        for name in self.thresholds:
            values = [c.scores[name] for c in self.cases if name in c.scores]
            out[name] = sum(values) / len(values) if values else 0.0
        return out

    def case(self, name: str) -> CaseResult:
        """The result of the case named ``name`` (``KeyError`` naming it and the cases there are)."""
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"no case {name!r} in the report (cases: {[c.name for c in self.cases]})")

    # -- JSON ------------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data (``to_json`` writes it; ``from_json`` reads it back)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "min_pass_rate": self.min_pass_rate,
            "repeat": self.repeat,
            "evaluators": [{"name": n, "threshold": t} for n, t in self.thresholds.items()],
            "cases": [
                {
                    "name": c.name,
                    "input": _data(c.input),
                    "expected_output": _data(c.expected_output),
                    "metadata": _data(c.metadata),
                    "passed": c.passed,
                    "scores": c.scores,
                    "reasons": c.reasons,
                    "runs": [
                        {
                            "output": _data(r.output),
                            "error": r.error,
                            "duration": r.duration,
                            "tokens": r.tokens,
                            "tool_calls": [{"name": t.name, "arguments": _data(t.arguments)} for t in r.tool_calls],
                            "scores": [
                                {"evaluator": s.evaluator, "score": s.score, "passed": s.passed, "reason": s.reason}
                                for s in r.scores
                            ],
                        }
                        for r in c.runs
                    ],
                }
                for c in self.cases
            ],
        }

    def to_json(self, path: str | os.PathLike[str] | None = None, *, indent: int = 2) -> str:
        """The report as JSON text; written to ``path`` too when given."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=indent) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> EvaluationReport:
        """A report from ``to_json``'s text, or from a file holding it (a baseline for :meth:`compare`)."""
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text(encoding="utf-8")
        data = json.loads(text)
        thresholds = {e["name"]: float(e["threshold"]) for e in data["evaluators"]}
        cases = [
            CaseResult(
                c["name"],
                c.get("input"),
                c.get("expected_output"),
                dict(c.get("metadata") or {}),
                [
                    RunResult(
                        r.get("output"),
                        r.get("error"),
                        float(r.get("duration", 0.0)),
                        int(r.get("tokens", 0)),
                        [ToolCallRecord(t["name"], t.get("arguments")) for t in r.get("tool_calls", [])],
                        [
                            Score(s["evaluator"], float(s["score"]), bool(s["passed"]), s.get("reason"))
                            for s in r["scores"]
                        ],
                    )
                    for r in c["runs"]
                ],
                thresholds,
            )
            for c in data["cases"]
        ]
        return cls(data["name"], cases, thresholds, float(data.get("min_pass_rate", 1.0)), int(data.get("repeat", 1)))

    # -- comparing -------------------------------------------------------------------------------------------

    def compare(self, baseline: EvaluationReport | str | os.PathLike[str]) -> ReportComparison:
        """This report's cases against ``baseline``'s (a report, or its JSON text or file): a case improved when
        it passes now and did not, or passes (or fails) as before with a higher mean score; regressed the other
        way round; unchanged otherwise."""
        base = baseline if isinstance(baseline, EvaluationReport) else EvaluationReport.from_json(baseline)
        before = {c.name: c for c in base.cases}
        now = {c.name: c for c in self.cases}
        improved: list[str] = []
        regressed: list[str] = []
        unchanged: list[str] = []
        for name, case in now.items():
            old = before.get(name)
            if old is None:
                continue
            a, b = (case.passed, round(case.mean_score, 9)), (old.passed, round(old.mean_score, 9))
            (improved if a > b else regressed if a < b else unchanged).append(name)
        return ReportComparison(
            improved,
            regressed,
            unchanged,
            added=[n for n in now if n not in before],
            removed=[n for n in before if n not in now],
        )

    # -- printing --------------------------------------------------------------------------------------------

    def print(self, file: TextIO | None = None, *, width: int | None = None) -> None:
        """Print the report as a table: one row per case, a column per evaluator (mean score, ✓ or ✗), then
        duration, tokens and why a case failed; the pass rate below. Uses ``rich`` (the ``evals`` extra) when
        installed, plain text otherwise."""
        out = file if file is not None else sys.stdout
        try:
            from rich.console import Console
            from rich.markup import escape
            from rich.table import Table
        except ImportError:  # pragma: no cover - the evals extra brings rich
            out.write(self._plain_table())
            return
        table = Table(title=f"{self.name}: {self._summary()}", title_justify="left")
        table.add_column("case")
        for name in self.thresholds:
            table.add_column(name, justify="right")
        table.add_column("s", justify="right")
        table.add_column("tokens", justify="right")
        table.add_column("result")
        for c in self.cases:
            scores = c.scores
            cells = [
                _cell(scores.get(name), self.thresholds[name]) if name in scores else "-" for name in self.thresholds
            ]
            reasons = "; ".join(r.splitlines()[0] for r in c.reasons if r)
            verdict = "[green]PASS[/]" if c.passed else f"[red]FAIL[/] {escape(reasons)}"
            table.add_row(c.name, *cells, f"{c.duration:.2f}", f"{c.tokens:g}", verdict)
        console = Console(file=out, width=width, highlight=False)
        if width is None and not console.is_terminal:  # a file or a pipe: wide enough for the reasons
            console = Console(file=out, width=140, highlight=False)
        console.print(table)

    def _summary(self) -> str:
        passed = sum(c.passed for c in self.cases)
        verdict = "PASSED" if self.passed else "FAILED"
        return (
            f"{passed}/{len(self.cases)} cases passed ({self.pass_rate:.0%}, needs {self.min_pass_rate:.0%}): {verdict}"
        )

    def _plain_table(self) -> str:  # pragma: no cover - without rich
        lines = [f"{self.name}: {self._summary()}"]
        for c in self.cases:
            scores = " ".join(f"{n}={s:.2f}" for n, s in c.scores.items())
            lines.append(f"{'PASS' if c.passed else 'FAIL'} {c.name} {scores} {'; '.join(c.reasons)}")
        return "\n".join(lines) + "\n"

    def to_html(self, path: str | os.PathLike[str] | None = None) -> str:
        """The report as one self-contained HTML page (inline CSS and SVG, no script, no external URL): a
        summary, a bar chart of each evaluator's mean score, and every case's runs in detail. Written to
        ``path`` too when given."""
        from adk.evals._html import report_html

        page = report_html(self)
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page


def _cell(score: float | None, threshold: float) -> str:
    if score is None:
        return "-"
    mark = "[green]✓[/]" if score >= threshold else "[red]✗[/]"
    return f"{score:.2f} {mark}"


def _data(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)
