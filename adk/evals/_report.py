"""The report of an evaluation: per case, each run's scores, output, trajectory, duration and tokens; pass rules;
printing (a rich table), JSON, HTML, and comparison with a baseline."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from html import escape
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


# ----------------------------------------------------------------------------------------------------------
# The HTML page of a report: one self-contained file (inline CSS and SVG; no script, no font, no external URL).

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1f2328; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
.summary { color: #57606a; margin-bottom: 1.5rem; }
.pass { color: #1a7f37; font-weight: 600; } .fail { color: #cf222e; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
th, td { border-bottom: 1px solid #d0d7de; padding: .35rem .5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
details { border: 1px solid #d0d7de; border-radius: 6px; margin: .5rem 0; padding: .5rem .75rem; }
summary { cursor: pointer; font-weight: 600; }
pre { background: #f6f8fa; padding: .5rem; border-radius: 4px; white-space: pre-wrap; word-break: break-word; }
.chart text { font-size: 12px; fill: #1f2328; }
"""

_BAR_HEIGHT = 22
_LABEL_WIDTH = 180
_CHART_WIDTH = 420


def _chart(report: EvaluationReport) -> str:
    """A horizontal bar per evaluator: its mean score, the threshold as a tick."""
    means = report.evaluator_means
    height = _BAR_HEIGHT * len(means) + 10
    rows = []
    for i, (name, mean) in enumerate(means.items()):
        y = 5 + i * _BAR_HEIGHT
        width = max(0.0, min(1.0, mean)) * _CHART_WIDTH
        threshold = report.thresholds[name]
        colour = "#2da44e" if mean >= threshold else "#cf222e"
        tick = _LABEL_WIDTH + threshold * _CHART_WIDTH
        rows.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end">{escape(name)}</text>'
            f'<rect x="{_LABEL_WIDTH}" y="{y + 3}" width="{_CHART_WIDTH}" height="{_BAR_HEIGHT - 6}" fill="#eaeef2"/>'
            f'<rect class="bar" x="{_LABEL_WIDTH}" y="{y + 3}" width="{width:.1f}" height="{_BAR_HEIGHT - 6}" '
            f'fill="{colour}"><title>{escape(name)}: {mean:.2f}</title></rect>'
            f'<line x1="{tick:.1f}" x2="{tick:.1f}" y1="{y}" y2="{y + _BAR_HEIGHT}" stroke="#1f2328"/>'
            f'<text x="{_LABEL_WIDTH + _CHART_WIDTH + 8}" y="{y + 15}">{mean:.2f}</text>'
        )
    total = _LABEL_WIDTH + _CHART_WIDTH + 60
    return (
        f'<svg class="chart" role="img" aria-label="mean score per evaluator" width="{total}" height="{height}" '
        f'viewBox="0 0 {total} {height}">{"".join(rows)}</svg>'
    )


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return f"<pre>{escape(text)}</pre>"


def _case(case: CaseResult, index: int) -> str:
    verdict = '<span class="pass">PASS</span>' if case.passed else '<span class="fail">FAIL</span>'
    parts = [f'<details id="case-{index}"{"" if case.passed else " open"}>']
    parts.append(f"<summary>{verdict} {escape(case.name)}</summary>")
    if case.reasons:
        parts.append("<ul>" + "".join(f"<li>{escape(r)}</li>" for r in case.reasons) + "</ul>")
    parts.append("<h4>Input</h4>" + _pre(case.input))
    if case.expected_output is not None:
        parts.append("<h4>Expected output</h4>" + _pre(case.expected_output))
    for n, run in enumerate(case.runs):
        parts.append(f"<h4>Run {n + 1} &middot; {run.duration:.3f} s &middot; {run.tokens} tokens</h4>")
        parts.append(_pre(run.output) if run.error is None else f'<p class="fail">{escape(run.error)}</p>')
        if run.tool_calls:
            calls = "".join(
                f"<li><code>{escape(t.name)}</code> {escape(json.dumps(t.arguments, ensure_ascii=False, default=str))}"
                "</li>"
                for t in run.tool_calls
            )
            parts.append(f"<ol>{calls}</ol>")
        rows = "".join(
            f'<tr><td>{escape(s.evaluator)}</td><td class="num">{s.score:.2f}</td>'
            f"<td>{'✓' if s.passed else '✗'}</td><td>{escape(s.reason or '')}</td></tr>"
            for s in run.scores
        )
        parts.append(f"<table><tr><th>evaluator</th><th>score</th><th></th><th>reason</th></tr>{rows}</table>")
    parts.append("</details>")
    return "".join(parts)


def report_html(report: EvaluationReport) -> str:
    """The page (see the module docstring)."""
    names = list(report.thresholds)
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = []
    for i, c in enumerate(report.cases):
        scores = c.scores
        cells = "".join(f'<td class="num">{scores[n]:.2f}</td>' if n in scores else "<td>-</td>" for n in names)
        verdict = '<span class="pass">PASS</span>' if c.passed else '<span class="fail">FAIL</span>'
        rows.append(
            f'<tr><td><a href="#case-{i}">{escape(c.name)}</a></td>{cells}'
            f'<td class="num">{c.duration:.2f}</td><td class="num">{c.tokens:g}</td><td>{verdict}</td></tr>'
        )
    verdict = '<span class="pass">PASSED</span>' if report.passed else '<span class="fail">FAILED</span>'
    passed = sum(c.passed for c in report.cases)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(report.name)}: evaluation report</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(report.name)}</h1>"
        f'<p class="summary">{verdict}: {passed} of {len(report.cases)} cases passed ({report.pass_rate:.0%}; '
        f"needs {report.min_pass_rate:.0%}), {report.repeat} run(s) per case</p>"
        f"<h2>Mean score per evaluator</h2>{_chart(report)}"
        f"<h2>Cases</h2><table><tr><th>case</th>{head}<th>s</th><th>tokens</th><th>result</th></tr>"
        f"{''.join(rows)}</table>"
        f"{''.join(_case(c, i) for i, c in enumerate(report.cases))}"
        "</body></html>\n"
    )
