"""The HTML page of a report: one self-contained file (inline CSS and SVG; no script, no font, no external URL)."""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adk.evals._report import CaseResult, EvaluationReport

__all__ = ["report_html"]

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
