"""Dataset and Case: what is evaluated, loaded from and saved to YAML or JSON, and ``evaluate`` running it."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from adk.errors import DatasetError
from adk.evals._evaluators import (
    BUILTIN_EVALUATORS,
    Case,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    check_evaluators,
)
from adk.evals._report import CaseResult, EvaluationReport, RunResult, Score
from adk.evals._target import RunOutcome, Target, open_target, run_case
from compose.errors import NodeRunError

__all__ = ["Dataset"]


@dataclass
class Dataset:
    """Cases and the evaluators every case is scored by.

    Example::

        dataset = Dataset("trips", cases=[Case("hangzhou", "A day in Hangzhou?", expected_tool_calls=["get_weather"])],
                          evaluators=[Contains("umbrella"), TrajectoryMatch("in_order")])
        report = await dataset.evaluate(agent, concurrency=4)
        report.print()

    Args:
        name: the dataset's name (the report's title).
        cases: the cases (names unique).
        evaluators: what every case is scored by.
        min_pass_rate: the share of cases that must pass for the dataset to pass.
    """

    name: str
    cases: list[Case] = field(default_factory=list)
    evaluators: list[Evaluator] = field(default_factory=list)
    min_pass_rate: float = 1.0

    def __post_init__(self) -> None:
        self.cases = list(self.cases)
        for i, c in enumerate(self.cases):
            if not isinstance(c, Case):
                raise DatasetError(f"dataset '{self.name}': cases[{i}] is {type(c).__qualname__}, not a Case")
        seen: set[str] = set()
        for c in self.cases:
            if c.name in seen:
                raise DatasetError(f"dataset '{self.name}': two cases are named '{c.name}'")
            seen.add(c.name)
        self.evaluators = check_evaluators(self.evaluators, f"dataset '{self.name}'")
        if not 0.0 <= self.min_pass_rate <= 1.0:
            raise DatasetError(f"dataset '{self.name}': min_pass_rate must be in [0, 1], got {self.min_pass_rate}")

    # -- files -----------------------------------------------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        """The dataset as file data: evaluators by type and arguments."""
        data: dict[str, Any] = {"name": self.name}
        if self.min_pass_rate != 1.0:
            data["min_pass_rate"] = self.min_pass_rate
        data["evaluators"] = [e.to_data() for e in self.evaluators]
        data["cases"] = [c.to_data() for c in self.cases]
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "dataset") -> Dataset:
        """A dataset from file data (see :meth:`to_data`).

        Raises:
            DatasetError: a missing or wrong field, an unknown evaluator type or argument; names where.
        """
        if not isinstance(data, Mapping):
            raise DatasetError(f"{where}: a dataset is a mapping with name, evaluators and cases")
        unknown = set(data) - {"name", "cases", "evaluators", "min_pass_rate"}
        if unknown:
            raise DatasetError(f"{where}: unknown fields {sorted(unknown, key=str)}")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise DatasetError(f"{where}: 'name' must be a non-empty string")
        listed = _list(data, "evaluators", where)
        evaluators = [_evaluator(e, f"{where}: evaluators[{i}]") for i, e in enumerate(listed)]
        cases = []
        for i, c in enumerate(_list(data, "cases", where)):
            here = f"{where}: cases[{i}]"
            if not isinstance(c, Mapping):
                raise DatasetError(f"{here} is not a mapping")
            extra = set(c) - {"name", "input", "expected_output", "expected_tool_calls", "metadata", "evaluators"}
            if extra or "input" not in c:
                raise DatasetError(f"{here}: needs name and input; unknown fields {sorted(extra, key=str)}")
            own = [_evaluator(e, f"{here}.evaluators[{j}]") for j, e in enumerate(_list(c, "evaluators", here))]
            fields = {k: v for k, v in c.items() if k != "evaluators"}
            with _at(here):
                cases.append(Case(**fields, evaluators=own))
        rate = data.get("min_pass_rate", 1.0)
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise DatasetError(f"{where}: min_pass_rate must be a number in [0, 1], got {rate!r}")
        with _at(where):
            return cls(name, cases, evaluators, float(rate))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Dataset:
        """Load a dataset from a ``.yaml``/``.yml`` (PyYAML, the ``evals`` extra) or ``.json`` file.

        Raises:
            DatasetError: the file cannot be read or parsed, or its content is not a valid dataset.
        """
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix not in (".yaml", ".yml", ".json"):
            raise DatasetError(f"dataset file {p}: the suffix must be .yaml, .yml or .json")
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"cannot read dataset file {p}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise DatasetError(f"dataset file {p} is not UTF-8 text: byte {exc.start}: {exc.reason}") from None
        kind = "JSON" if suffix == ".json" else "YAML"
        try:
            if kind == "JSON":
                data = json.loads(text)
            else:
                import yaml

                data = yaml.safe_load(text)
        except RecursionError:
            raise DatasetError(f"dataset file {p} is nested too deeply to be read as {kind}") from None
        except ValueError as exc:  # json.JSONDecodeError: its message gives the line and column
            raise DatasetError(f"dataset file {p} is not valid JSON: {exc}") from None
        except Exception as exc:
            if type(exc).__module__.startswith("yaml"):  # a YAMLError: its message gives the line and column
                raise DatasetError(f"dataset file {p} is not valid YAML: {exc}") from None
            raise
        try:
            return cls.from_data(data, f"dataset file {p}")
        except RecursionError:
            raise DatasetError(f"dataset file {p}: its data is nested too deeply") from None

    def to_file(self, path: str | os.PathLike[str]) -> None:
        """Save the dataset as YAML (``.yaml``/``.yml``) or JSON (``.json``), by the path's suffix."""
        p = Path(path)
        data = self.to_data()
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml

            text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
        elif p.suffix.lower() == ".json":
            text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
        else:
            raise DatasetError(f"dataset file {p}: the suffix must be .yaml, .yml or .json")
        p.write_text(text, encoding="utf-8")

    # -- evaluating ------------------------------------------------------------------------------------------

    async def evaluate(
        self,
        target: Target,
        *,
        concurrency: int = 4,
        repeat: int = 1,
        cassette: Any = None,
        progress: bool | None = None,
    ) -> EvaluationReport:
        """Run every case (``repeat`` times each, at most ``concurrency`` runs at once) and score each run.

        Args:
            target: an agent (run with ``Runner(agent)``), a ``Runner``, a compiled graph, or a function returning
                one (called once, with ``cassette`` when it takes an argument, so that it can wrap its models and
                tools: ``cassette.wrap(model)``), or an async context manager giving one (closed at the end).
            concurrency: how many runs at once.
            repeat: runs per case; the report keeps each run and the mean of their scores.
            cassette: a ``compose.testing.cassette`` the runs record on or replay from (one file for the
                dataset); opened for the evaluation unless it is open already. An agent not built by a function
                given the cassette has its models and tools put on it for the evaluation (agents made of agents
                too); what cannot be (a compiled graph, a model a middleware holds) raises ``CassetteError``.
            progress: show a progress bar (rich) on standard error; None (the default): when it is a terminal.

        Returns:
            The report; cases in the dataset's order whatever order the runs finished in.
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        labels = _labels(self.evaluators)
        thresholds = {label: e.threshold for label, e in labels}
        per_case = [labels + _labels(c.evaluators, taken=set(thresholds)) for c in self.cases]
        for own in per_case:
            thresholds.update({label: e.threshold for label, e in own})
        runs: list[list[RunResult | None]] = [[None] * repeat for _ in self.cases]
        async with contextlib.AsyncExitStack() as stack:
            if cassette is not None and not cassette.is_open:
                await stack.enter_async_context(cassette)
            runnable = await open_target(target, cassette, stack)
            limiter = anyio.CapacityLimiter(concurrency)
            advance = await stack.enter_async_context(_progress(self.name, len(self.cases) * repeat, progress))

            async def one(i: int, r: int) -> None:
                async with limiter:
                    case = self.cases[i]
                    outcome = await run_case(runnable, case.name, case.input)
                    runs[i][r] = await _scored(case, outcome, per_case[i])
                advance()

            async with anyio.create_task_group() as tg:
                for i in range(len(self.cases)):
                    for r in range(repeat):
                        tg.start_soon(one, i, r)
        cases = [
            CaseResult(c.name, c.input, c.expected_output, c.metadata, [r for r in rs if r is not None], thresholds)
            for c, rs in zip(self.cases, runs, strict=True)
        ]
        return EvaluationReport(self.name, cases, thresholds, self.min_pass_rate, repeat)

    def evaluate_sync(self, target: Target, **options: Any) -> EvaluationReport:
        """:meth:`evaluate` for scripts: runs its own event loop (``anyio.run``)."""

        async def main() -> EvaluationReport:
            return await self.evaluate(target, **options)

        return anyio.run(main)


def _labels(evaluators: Sequence[Evaluator], taken: set[str] | None = None) -> list[tuple[str, Evaluator]]:
    """Report labels: the evaluator's name, numbered from the second evaluator of that name on."""
    used = set(taken or ())
    out = []
    for e in evaluators:
        label, n = e.label, 2
        while label in used:
            label, n = f"{e.label} ({n})", n + 1
        used.add(label)
        out.append((label, e))
    return out


async def _scored(case: Case, outcome: RunOutcome, evaluators: list[tuple[str, Evaluator]]) -> RunResult:
    error = describe_error(outcome.error) if outcome.error is not None else None
    scores = []
    ctx = EvaluatorContext(case, outcome.output, outcome.tool_calls, outcome.duration, outcome.tokens, outcome.messages)
    for label, evaluator in evaluators:
        if error is not None:
            scores.append(Score(label, 0.0, False, f"the run failed: {error}"))
            continue
        try:
            value = evaluator.evaluate(ctx)
            if inspect.isawaitable(value):
                value = await value
            scores.append(_score(label, value, evaluator.threshold))
        except Exception as exc:
            scores.append(Score(label, 0.0, False, f"{type(exc).__name__}: {exc}"))
    return RunResult(outcome.output, error, outcome.duration, outcome.tokens, outcome.tool_calls, scores)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` of a run's error; a node's failure is named by its cause (the model's or tool's error)."""
    while isinstance(exc, NodeRunError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}"


def _score(label: str, value: Any, threshold: float) -> Score:
    reason = None
    if isinstance(value, EvaluationResult):
        value, reason = value.value, value.reason
    if isinstance(value, bool):
        return Score(label, float(value), value, reason)
    if isinstance(value, int | float):
        return Score(label, float(value), float(value) >= threshold, reason)
    raise TypeError(
        f"evaluator {label} returned {type(value).__qualname__}: expected a bool, a float or an EvaluationResult"
    )


def _evaluator(data: Any, where: str) -> Evaluator:
    if isinstance(data, str):
        data = {"type": data}
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise DatasetError(f"{where}: an evaluator is {{type: Name, ...arguments}}, got {data!r}")
    kind = data["type"]
    args = {k: v for k, v in data.items() if k != "type"}
    cls: Any = BUILTIN_EVALUATORS.get(kind)
    if cls is None:
        module, sep, attr = kind.partition(":")
        if not sep:
            raise DatasetError(
                f"{where}: unknown evaluator type {kind!r} (built in: {', '.join(BUILTIN_EVALUATORS)}; "
                "a custom one is 'module:Class')"
            )
        try:
            cls = importlib.import_module(module)
            for part in attr.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError) as exc:
            raise DatasetError(f"{where}: cannot import evaluator {kind!r}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise DatasetError(f"{where}: {kind!r} is not an Evaluator class")
    try:
        evaluator: Evaluator = cls(**args)
    except DatasetError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{where}: bad arguments for {kind}: {exc}") from None
    return evaluator


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``data[key]`` as a list (absent or null: empty), or a DatasetError naming ``where`` and ``key``."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DatasetError(f"{where}: '{key}' must be a list, got {type(value).__qualname__}")
    return value


@contextlib.contextmanager
def _at(where: str) -> Iterator[None]:
    """A DatasetError raised inside (by Case or Dataset checking their fields) names ``where`` too."""
    try:
        yield
    except DatasetError as exc:
        raise DatasetError(f"{where}: {exc}") from None


@contextlib.asynccontextmanager
async def _progress(title: str, total: int, show: bool | None) -> AsyncIterator[Callable[[], None]]:
    """A callable advancing a rich progress bar on standard error (shown on a terminal only, unless ``show``)."""
    bar: Any = None
    if show is not False:
        try:
            from rich.console import Console
            from rich.progress import Progress
        except ImportError:  # pragma: no cover - the evals extra brings rich
            pass
        else:
            console = Console(stderr=True, force_terminal=True if show else None)
            if console.is_terminal:
                bar = Progress(console=console, transient=True)
    if bar is None:
        yield lambda: None
        return
    with bar:
        task = bar.add_task(title, total=total)
        yield lambda: bar.advance(task)
