"""adk.evals: each evaluator (trajectory modes on reordered and extra calls), pass rules, LLMJudge's structured
verdict, datasets in YAML and JSON, evaluate (concurrency gives the serial report; repeat; a cassette), reports
(table, JSON, compare, a self-contained HTML page), the progress bar, and the CLI's exit codes."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import ModelConfig, OutputConfig
from adk.evals import (
    Case,
    Contains,
    Dataset,
    DatasetError,
    EvaluationReport,
    EvaluationResult,
    Evaluator,
    EvaluatorContext,
    ExactMatch,
    LLMJudge,
    MatchesSchema,
    MaxDuration,
    MaxTokens,
    ToolCallRecord,
    TrajectoryMatch,
)
from adk.evals.__main__ import main as cli
from adk.middlewares.approval import ApprovalMiddleware
from adk.runner import Runner
from compose.errors import CassetteError
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ResponseMeta, ToolCall, ToolInfo, Usage
from compose.stream import StreamReader
from compose.testing import Cassette, CassetteChatModel, cassette
from compose.tools import tool

pytestmark = pytest.mark.anyio


def ctx(output: Any = None, calls: Sequence[tuple[str, Any]] = (), **case: Any) -> EvaluatorContext:
    return EvaluatorContext(
        Case(case.pop("name", "c"), case.pop("input", "q"), **case),
        output,
        [ToolCallRecord(n, a) for n, a in calls],
        duration=case.get("duration", 0.5),
        tokens=120,
    )


# --- evaluators --------------------------------------------------------------------------------------------------


class Weather(BaseModel):
    city: str
    celsius: float


def test_exact_match_and_contains() -> None:
    assert ExactMatch().evaluate(ctx(" Hangzhou ", expected_output="Hangzhou")).value is True
    miss = ExactMatch().evaluate(ctx("Suzhou", expected_output="Hangzhou"))
    assert miss.value is False and miss.reason == "expected 'Hangzhou', got 'Suzhou'"
    structured = Weather(city="Hangzhou", celsius=21)
    assert ExactMatch().evaluate(ctx(structured, expected_output={"city": "Hangzhou", "celsius": 21.0})).value
    assert Contains("umbrella").evaluate(ctx("Take an umbrella.")).value is True
    both = Contains(["Umbrella", "coat"], case_sensitive=False).evaluate(ctx("take an umbrella"))
    assert both.value is False and "missing 'coat'" in (both.reason or "")
    assert Contains().evaluate(ctx("tea at 3", expected_output="tea")).value is True
    with pytest.raises(DatasetError, match="Contains has no value"):
        Contains().evaluate(ctx("x"))


def test_matches_schema() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert MatchesSchema(schema).evaluate(ctx('{"city": "Hangzhou"}')).value is True
    bad = MatchesSchema(schema).evaluate(ctx('{"city": 3}'))
    assert bad.value is False and bad.reason is not None and bad.reason.startswith("at city:")
    assert MatchesSchema(schema).evaluate(ctx("not json")).reason.startswith("the output is not JSON")  # type: ignore[union-attr]
    assert MatchesSchema(Weather).evaluate(ctx(Weather(city="a", celsius=1))).value is True
    wrong = MatchesSchema(Weather).evaluate(ctx({"city": "a"}))
    assert wrong.value is False and wrong.reason == "at celsius: Field required"


CALLS = [("get_weather", {"city": "Hangzhou"}), ("search", {"q": "tea"}), ("route", {"places": ["a", "b"]})]


@pytest.mark.parametrize(
    ("mode", "actual", "expected", "passed"),
    [
        ("exact", CALLS, ["get_weather", "search", "route"], True),
        ("exact", CALLS[::-1], ["get_weather", "search", "route"], False),  # reordered
        ("exact", [*CALLS, ("extra", {})], ["get_weather", "search", "route"], False),  # an extra call
        ("in_order", [("extra", {}), CALLS[0], ("extra", {}), CALLS[2]], ["get_weather", "route"], True),
        ("in_order", CALLS[::-1], ["get_weather", "route"], False),
        ("any_order", CALLS[::-1], ["get_weather", "route"], True),
        ("any_order", [CALLS[0]], ["get_weather", "get_weather"], False),  # a call counts once
        ("any_order", [*CALLS, ("extra", {})], ["route", "search", "get_weather"], True),
    ],
)
def test_trajectory_modes(mode: Any, actual: list[Any], expected: list[Any], passed: bool) -> None:
    result = TrajectoryMatch(mode).evaluate(ctx(calls=actual, expected_tool_calls=expected))
    assert result.value is passed, result.reason


def test_trajectory_arguments() -> None:
    expected = [{"name": "get_weather", "arguments": {"city": "Suzhou"}}, "search"]
    c = ctx(calls=CALLS[:2], expected_tool_calls=expected)
    result = TrajectoryMatch("exact").evaluate(c)
    assert result.value is False
    assert result.reason == 'call 0: expected get_weather({"city": "Suzhou"}), got get_weather({"city": "Hangzhou"})'
    assert TrajectoryMatch("exact", check_args=False).evaluate(c).value is True
    with pytest.raises(DatasetError, match="mode must be"):
        TrajectoryMatch("sometimes")  # type: ignore[arg-type]
    with pytest.raises(DatasetError, match="needs the case's expected_tool_calls"):
        TrajectoryMatch().evaluate(ctx())
    with pytest.raises(DatasetError, match="an expected tool call is a tool name"):
        Case("c", "q", expected_tool_calls=[3])  # type: ignore[list-item]


def test_limits() -> None:
    assert MaxDuration(1.0).evaluate(ctx()).value is True
    slow = MaxDuration(0.1).evaluate(ctx())
    assert slow.value is False and slow.reason == "took 0.500s, more than 0.1s"
    assert MaxTokens(100).evaluate(ctx()).reason == "used 120 tokens, more than 100"


# --- a deterministic agent ------------------------------------------------------------------------------------


class TripModel:
    """Answers from the conversation (so concurrent runs share it): asks for the weather of the city in the user's
    message, then answers; a city named 'Nowhere' makes it fail."""

    model_name = "trip"
    tools: tuple[ToolInfo, ...] = ()

    def with_tools(self, tools: Sequence[ToolInfo]) -> TripModel:
        return self

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        await anyio.lowlevel.checkpoint()
        last = messages[-1]
        usage = ResponseMeta(finish_reason="stop", usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15))
        if last.role == "user":
            city = last.content.split()[-1].rstrip("?")
            if city == "Nowhere":
                raise RuntimeError("no such city")
            call = ToolCall(id="c1", function=FunctionCall(name="get_weather", arguments=json.dumps({"city": city})))
            return Message(role="assistant", tool_calls=[call], response_meta=usage)
        return Message(role="assistant", content=f"Weather: {last.content}. Take an umbrella.", response_meta=usage)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return StreamReader.from_iterable([await self.generate(messages, **opts)])


@tool
def get_weather(city: str) -> str:
    """Weather.

    Args:
        city: the city.
    """
    return f"rain in {city}"


def build_agent() -> ChatModelAgent:
    return ChatModelAgent("trip", "trips", "Plan.", TripModel(), [get_weather])


@dataclass
class Polite(Evaluator):
    """A custom evaluator returning a score."""

    word: str = "umbrella"
    threshold: float = 0.5

    def evaluate(self, ctx: EvaluatorContext) -> float:
        return 1.0 if self.word in str(ctx.output) else 0.25


class Broken(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> bool:
        raise ValueError("evaluator bug")


def weather_call(city: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"city": city}}


def dataset(**kw: Any) -> Dataset:
    cases = [
        Case("hangzhou", "Weather in Hangzhou?", expected_tool_calls=[weather_call("Hangzhou")]),
        Case("suzhou", "Weather in Suzhou?", expected_tool_calls=["get_weather"], metadata={"tier": 1}),
        Case("wrong", "Weather in Suzhou?", expected_tool_calls=[weather_call("X")]),
        Case("fails", "Weather in Nowhere?", expected_tool_calls=["get_weather"]),
    ]
    evaluators = [Contains("umbrella"), TrajectoryMatch("exact"), MaxTokens(100), Polite()]
    return Dataset("trips", cases, evaluators, **kw)


def without_durations(report: EvaluationReport) -> dict[str, Any]:
    data = report.to_dict()
    for c in data["cases"]:
        for r in c["runs"]:
            r.pop("duration")
    return data


async def test_evaluate_scores_every_case_and_concurrency_gives_the_serial_report() -> None:
    serial = await dataset(min_pass_rate=0.5).evaluate(build_agent(), concurrency=1)
    parallel = await dataset(min_pass_rate=0.5).evaluate(Runner(build_agent()), concurrency=4)
    assert without_durations(serial) == without_durations(parallel)
    assert [(c.name, c.passed) for c in serial.cases] == [
        ("hangzhou", True),
        ("suzhou", True),
        ("wrong", False),
        ("fails", False),
    ]
    assert serial.pass_rate == 0.5 and serial.passed
    hz = serial.case("hangzhou")
    assert hz.runs[0].output == "Weather: rain in Hangzhou. Take an umbrella."
    assert hz.runs[0].tool_calls == [ToolCallRecord("get_weather", {"city": "Hangzhou"})]
    assert hz.runs[0].tokens == 30
    assert hz.scores == {"Contains": 1.0, "TrajectoryMatch": 1.0, "MaxTokens": 1.0, "Polite": 1.0}
    assert serial.case("wrong").reasons == [
        'TrajectoryMatch: call 0: expected get_weather({"city": "X"}), got get_weather({"city": "Suzhou"})'
    ]
    failed = serial.case("fails")
    assert failed.error == "RuntimeError: no such city"
    assert all(s.reason == "the run failed: RuntimeError: no such city" for s in failed.runs[0].scores)
    assert not (await dataset().evaluate(build_agent())).passed  # min_pass_rate 1.0


async def test_score_thresholds_repeat_and_a_raising_evaluator() -> None:
    class Half(Evaluator):
        threshold = 0.5

        def __init__(self) -> None:
            self.calls = 0

        async def evaluate(self, ctx: EvaluatorContext) -> EvaluationResult:
            self.calls += 1
            return EvaluationResult(0.25 if self.calls % 2 else 1.0, f"call {self.calls}")

    half = Half()
    ds = Dataset("d", [Case("hangzhou", "Weather in Hangzhou?")], [half, Polite("sunscreen"), Broken()])
    report = await ds.evaluate(build_agent(), repeat=4, concurrency=1)
    (case,) = report.cases
    assert len(case.runs) == 4 and half.calls == 4
    assert case.scores["Half"] == pytest.approx(0.625)  # mean of 0.25 and 1.0: passes at 0.5
    assert sorted(s.passed for r in case.runs for s in r.scores if s.evaluator == "Half") == [False, False, True, True]
    assert case.scores["Polite"] == 0.25  # below its threshold 0.5
    assert case.runs[0].scores[2].reason == "ValueError: evaluator bug"
    assert not case.passed
    assert case.reasons == ["Polite: score 0.25", "Broken: ValueError: evaluator bug"]
    assert report.thresholds == {"Half": 0.5, "Polite": 0.5, "Broken": 1.0}


async def test_compare_and_json_round_trip(tmp_path: Path) -> None:
    base = await dataset().evaluate(build_agent())
    now_ds = dataset()
    now_ds.cases[2] = Case("wrong", "Weather in X?", expected_tool_calls=[weather_call("X")])
    now_ds.cases[0] = Case("hangzhou", "Weather in Nowhere?")
    now_ds.cases.append(Case("new", "Weather in Lhasa?"))
    now = await now_ds.evaluate(build_agent())
    path = tmp_path / "base.json"
    base.to_json(path)
    loaded = EvaluationReport.from_json(path)
    assert without_durations(loaded) == without_durations(base)
    diff = now.compare(path)
    assert (diff.improved, diff.regressed, diff.unchanged) == (["wrong"], ["hangzhou"], ["suzhou", "fails"])
    assert diff.added == ["new"] and diff.removed == []
    assert now.compare(base) == diff


async def test_html_page_is_self_contained_and_shows_every_case(tmp_path: Path) -> None:
    report = await dataset().evaluate(build_agent())
    page = report.to_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == page
    assert not re.search(r"https?:|//[a-z]|<script|<link|src=|@import|url\(", page, re.I)
    for c in report.cases:
        assert f"{c.name}</a>" in page and f"{c.name}</summary>" in page
    assert page.count('class="bar"') == len(report.thresholds)  # a bar per evaluator
    assert "no such city" in page and "get_weather" in page
    assert page.startswith("<!DOCTYPE html>")


async def test_print_is_a_table_and_progress_shows_on_a_terminal_only(capsys: pytest.CaptureFixture[str]) -> None:
    report = await dataset().evaluate(build_agent())
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""  # not a terminal: no progress bar
    import io

    out = io.StringIO()
    report.print(out)
    text = out.getvalue()
    assert "trips: 2/4 cases passed (50%, needs 100%): FAILED" in text
    for c in report.cases:
        assert c.name in text
    assert "PASS" in text and "FAIL" in text and "TrajectoryMatch" in text
    await dataset().evaluate(build_agent(), progress=True)
    assert "trips" in capsys.readouterr().err


# --- LLMJudge -----------------------------------------------------------------------------------------------------


def judge_model(score: float = 0.8) -> ScriptedChatModel:
    """A judge answering through the final_answer tool (its structured output mode for a model without
    response_format)."""
    verdict = json.dumps({"score": score, "passed": score >= 0.5, "reason": "mentions the rain"})
    call = ToolCall(function=FunctionCall(name="final_answer", arguments=verdict))
    answer = Message(role="assistant", tool_calls=[call])
    return ScriptedChatModel([answer] * 8)


JUDGE = judge_model()


async def test_llm_judge_scores_with_a_structured_verdict() -> None:
    model = judge_model(0.8)
    judge = LLMJudge("Does it mention the weather?", model)
    result = await judge.evaluate(ctx("rain, take an umbrella", input="Weather?", expected_output="rain"))
    assert result == EvaluationResult(0.8, "mentions the rain")
    prompt = model.calls[0].messages[-1].content
    assert "Rubric: Does it mention the weather?" in prompt and "Answer: rain, take an umbrella" in prompt
    assert "Expected answer: rain" in prompt
    assert [t.name for t in model.calls[0].tools] == ["final_answer"]
    low = await Dataset("d", [Case("c", "Weather in Hangzhou?")], [LLMJudge("r", judge_model(0.4))]).evaluate(
        build_agent()
    )
    assert low.cases[0].scores == {"LLMJudge": 0.4} and not low.passed  # threshold 0.5
    with pytest.raises(DatasetError, match="needs a rubric"):
        LLMJudge("", model)


# --- files --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_dataset_files_round_trip(tmp_path: Path, suffix: str) -> None:
    ds = Dataset(
        "trips",
        [
            Case("a", "Weather in Hangzhou?", expected_output="umbrella", metadata={"tier": 1}),
            Case("b", [Message(role="user", content="hi")], expected_tool_calls=["x", weather_call("Hangzhou")]),
        ],
        [
            Contains("umbrella", case_sensitive=False),
            TrajectoryMatch("in_order", check_args=False, threshold=0.5),
            LLMJudge("rubric", "tests.adk.test_evals:JUDGE"),
            MatchesSchema({"type": "string"}),
            Polite("coat"),
        ],
        min_pass_rate=0.8,
    )
    path = tmp_path / f"d{suffix}"
    ds.to_file(path)
    text = path.read_text(encoding="utf-8")
    assert f"{Polite.__module__}:Polite" in text and "tests.adk.test_evals:JUDGE" in text
    loaded = Dataset.from_file(path)
    assert loaded.to_data() == ds.to_data()
    assert loaded.evaluators[1] == TrajectoryMatch("in_order", check_args=False, threshold=0.5)
    assert loaded.cases[1].input == [{"role": "user", "content": "hi"}]
    with pytest.raises(DatasetError, match="a model object cannot be saved"):
        Dataset("d", [], [LLMJudge("r", JUDGE)]).to_data()


@dataclass
class TrimmedMatch(ExactMatch):
    """A user's subclass of a built-in evaluator: saved under its own path, not the built-in's bare name."""


def test_a_subclass_of_a_builtin_evaluator_round_trips(tmp_path: Path) -> None:
    ds = Dataset("sub", [Case("a", "hi", expected_output="hi")], [TrimmedMatch(), ExactMatch()])
    data = ds.to_data()
    assert [e["type"] for e in data["evaluators"]] == [f"{__name__}:TrimmedMatch", "ExactMatch"]
    ds.to_file(tmp_path / "d.json")
    assert type(Dataset.from_file(tmp_path / "d.json").evaluators[0]) is TrimmedMatch


def test_dataset_errors_name_what_is_wrong(tmp_path: Path) -> None:
    def load(text: str, name: str = "d.yaml") -> Dataset:
        (tmp_path / name).write_text(text, encoding="utf-8")
        return Dataset.from_file(tmp_path / name)

    with pytest.raises(DatasetError, match=r"evaluators\[0\]: unknown evaluator type 'Nope'"):
        load("name: d\nevaluators: [{type: Nope}]\ncases: []\n")
    with pytest.raises(DatasetError, match=r"evaluators\[0\]: bad arguments for Contains"):
        load("name: d\nevaluators: [{type: Contains, colour: red}]\n")
    with pytest.raises(DatasetError, match=r"cannot import evaluator 'no_such_module:X'"):
        load("name: d\nevaluators: [{type: 'no_such_module:X'}]\n")
    with pytest.raises(DatasetError, match=r"cases\[1\]: needs name and input"):
        load("name: d\ncases: [{name: a, input: q}, {name: b}]\n")
    with pytest.raises(DatasetError, match="two cases are named 'a'"):
        load("name: d\ncases: [{name: a, input: q}, {name: a, input: r}]\n")
    with pytest.raises(DatasetError, match="is not valid YAML"):
        load("name: [d\n")
    with pytest.raises(DatasetError, match="is not valid JSON"):
        load("{", "d.json")
    with pytest.raises(DatasetError, match="cannot read dataset file"):
        Dataset.from_file(tmp_path / "missing.yaml")
    with pytest.raises(DatasetError, match="the suffix must be"):
        load("name: d", "d.txt")
    with pytest.raises(DatasetError, match="min_pass_rate must be in"):
        Dataset("d", min_pass_rate=2)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bin.json", b"\xff\xfe{}", r"bin.json is not UTF-8 text: byte 0"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, r"deep.json is nested too deeply to be read as JSON"),
        ("deep.yaml", b"[" * 5_000 + b"]" * 5_000, r"deep.yaml is nested too deeply to be read as YAML"),
        ("rate.json", b'{"name": "d", "min_pass_rate": [1]}', r"rate.json: min_pass_rate must be a number"),
        ("rate.yaml", b"name: d\nmin_pass_rate: high\n", r"rate.yaml: min_pass_rate must be a number"),
        ("cases.json", b'{"name": "d", "cases": 5}', r"cases.json: 'cases' must be a list, got int"),
        ("evals.yaml", b"name: d\nevaluators: {type: Contains}\n", r"evals.yaml: 'evaluators' must be a list"),
        ("own.json", b'{"name": "d", "cases": [{"name": "a", "input": "q", "evaluators": 1}]}', r"cases\[0\]: 'eval"),
        ("case.json", b'{"name": "d", "cases": [{"name": 5, "input": "q"}]}', r"case.json: cases\[0\]: a case needs"),
        ("meta.yaml", b"name: d\ncases: [{name: a, input: q, metadata: 3}]\n", r"meta.yaml: cases\[0\]: case 'a'"),
        ("mode.yaml", b"name: d\nevaluators: [{type: TrajectoryMatch, mode: 5}]\n", r"mode.yaml: evaluators\[0\]: T"),
        ("keys.yaml", b"name: d\ncases: [{name: a, input: q, 1: 2}]\n", r"keys.yaml: cases\[0\]: needs name and input"),
    ],
)
def test_a_bad_dataset_file_raises_a_dataset_error_naming_file_and_place(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DatasetError, match=message) as caught:
        Dataset.from_file(tmp_path / name)
    assert str(tmp_path / name) in str(caught.value)


# --- a cassette for the dataset -----------------------------------------------------------------------------------


def build_on(tape: Cassette) -> ChatModelAgent:
    return ChatModelAgent("trip", "trips", "Plan.", tape.wrap(TripModel()), [tape.wrap_tool(get_weather)])


async def test_evaluate_on_a_cassette_records_then_replays(tmp_path: Path) -> None:
    path = tmp_path / "evals.json"
    ds = dataset()
    recorded = await ds.evaluate(build_on, cassette=cassette(path, "all"))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert {i["kind"] for i in data["interactions"]} == {"model", "tool"}

    class Refuses(TripModel):
        async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
            raise AssertionError("a replay calls no model")

    def replay_build(tape: Cassette) -> ChatModelAgent:
        return ChatModelAgent("trip", "trips", "Plan.", tape.wrap(Refuses()), [tape.wrap_tool(get_weather)])

    replayed = await ds.evaluate(replay_build, cassette=cassette(path, "none"), concurrency=3)
    expected = without_durations(recorded)
    expected["cases"][3]["runs"][0]["error"] = replayed.cases[3].runs[0].error  # the failed call was not recorded
    got = without_durations(replayed)
    for c_got, c_exp in zip(got["cases"], expected["cases"], strict=True):
        if c_exp["name"] != "fails":
            assert c_got == c_exp
    assert (replayed.cases[3].error or "").startswith("CassetteMismatchError: ")


class Refuses(TripModel):
    """A model that fails the test if a replay calls it."""

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        raise AssertionError("a replay calls no model")


calls_of_weather: list[str] = []


@tool(name="get_weather")
def counted_weather(city: str) -> str:
    """Weather.

    Args:
        city: the city.
    """
    calls_of_weather.append(city)
    return f"rain in {city}"


def two_agents(model: Any) -> Any:
    """A sequential agent of two agents, the first with an agent tool; every model is ``model``."""
    from adk.agents import AgentTool, SequentialAgent

    inner = ChatModelAgent("forecaster", "forecasts", "Forecast.", model, [counted_weather])
    planner = ChatModelAgent("trip", "trips", "Plan.", model, [AgentTool(inner), counted_weather])
    return SequentialAgent("pipeline", "plans", [planner, ChatModelAgent("notes", "notes", "Note.", model)])


@pytest.mark.parametrize("make", [lambda m: ChatModelAgent("trip", "trips", "Plan.", m, [counted_weather]), two_agents])
async def test_a_ready_agent_is_put_on_the_cassette_and_a_replay_calls_no_model(tmp_path: Path, make: Any) -> None:
    path = tmp_path / "evals.json"
    ds = Dataset("d", [Case("hz", "Weather in Hangzhou?"), Case("sz", "Weather in Suzhou?")], [Contains("umbrella")])
    live = make(TripModel())
    recorded = await ds.evaluate(live, cassette=cassette(path, "once"))
    kinds = [i["kind"] for i in json.loads(path.read_text(encoding="utf-8"))["interactions"]]
    assert all(c.error is None for c in recorded.cases) and {"model", "tool"} <= set(kinds)
    calls_of_weather.clear()
    ready = make(Refuses())
    first = ready if isinstance(ready, ChatModelAgent) else ready.sub_agents[0].agent
    model_before, tools_before = first.model, first.tools_config
    replayed = await ds.evaluate(ready, cassette=cassette(path, "none"))
    assert without_durations(replayed) == without_durations(recorded)
    assert calls_of_weather == []  # the tools were replayed too
    assert first.model is model_before and first.tools_config is tools_before  # put back after the evaluation
    replayed = await ds.evaluate(lambda: make(Refuses()), cassette=cassette(path, "none"))  # the CLI's build()
    assert without_durations(replayed) == without_durations(recorded)


async def test_what_cannot_be_put_on_the_cassette_is_refused(tmp_path: Path) -> None:
    from adk.chat_model.failover import ModelFailoverConfig

    path = tmp_path / "evals.json"
    ds = Dataset("d", [Case("hz", "Weather in Hangzhou?")], [Contains("umbrella")])
    picked = ModelFailoverConfig(get_failover_model=lambda ctx: Refuses(), max_retries=1)
    agent = ChatModelAgent(
        "trip", "trips", "Plan.", Refuses(), [get_weather], model_config=ModelConfig(failover=picked)
    )
    with pytest.raises(CassetteError, match=r"cannot put agent 'trip': the models its get_failover_model picks"):
        await ds.evaluate(agent, cassette=cassette(path, "all"))
    assert not isinstance(agent.model, CassetteChatModel)  # nothing was left wrapped

    from compose import END, START, Graph

    g = Graph[str, str]()
    g.add_lambda_node("echo", lambda x: x)
    g.add_edge(START, "echo")
    g.add_edge("echo", END)
    with pytest.raises(CassetteError, match="cannot put a compiled graph on cassette"):
        await ds.evaluate(g.compile(), cassette=cassette(path, "all"))


async def test_bad_targets_and_options() -> None:
    with pytest.raises(TypeError, match="cannot evaluate int"):
        await dataset().evaluate(3)
    with pytest.raises(TypeError, match="returned str, not an agent"):
        await dataset().evaluate(lambda: "agent")
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        await dataset().evaluate(build_agent(), concurrency=0)


# --- the CLI --------------------------------------------------------------------------------------------------


def write_dataset(tmp_path: Path, cases: list[dict[str, Any]]) -> Path:
    data = {"name": "cli", "evaluators": [{"type": "Contains", "value": "umbrella"}], "cases": cases}
    path = tmp_path / "cli.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_dataset(tmp_path, [{"name": "hz", "input": "Weather in Hangzhou?"}])
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    target = "tests.adk.test_evals:build_agent"
    assert cli(["run", str(good), target, "--html", str(html), "--json", str(js), "--concurrency", "2"]) == 0
    out = capsys.readouterr().out
    assert "cli: 1/1 cases passed" in out and "hz" in out
    assert json.loads(js.read_text(encoding="utf-8"))["passed"] is True and "hz" in html.read_text(encoding="utf-8")
    cases = [{"name": "hz", "input": "Weather in Hangzhou?"}, {"name": "no", "input": "Weather in Nowhere?"}]
    bad = write_dataset(tmp_path, cases)
    assert cli(["run", str(bad), target]) == 1
    assert cli(["run", str(bad), target, "--min-pass-rate", "0.5"]) == 0
    capsys.readouterr()
    assert cli(["run", str(tmp_path / "missing.yaml"), target]) == 2
    assert "cannot read dataset file" in capsys.readouterr().err
    assert cli(["run", str(good), "tests.adk.test_evals:nothing_here"]) == 2
    assert cli(["run", str(good), "no_colon"]) == 2
    assert cli(["run", str(good), "tests.adk.test_evals:JUDGE"]) == 2  # a model, not an agent
    assert "cannot evaluate ScriptedChatModel" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli(["run", str(good)])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        cli(["run", str(good), target, "--cassette-mode", "sometimes"])
    assert exit_.value.code == 2


def test_cli_on_a_cassette_and_a_file_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_dataset(tmp_path, [{"name": "hz", "input": "Weather in Hangzhou?"}])
    module = tmp_path / "target.py"
    module.write_text("from tests.adk.test_evals import build_on as build\n", encoding="utf-8")
    tape = tmp_path / "tape.json"
    assert cli(["run", str(good), f"{module}:build", "--cassette", str(tape)]) == 0  # once: records
    assert tape.exists()
    assert cli(["run", str(good), f"{module}:build", "--cassette", str(tape), "--cassette-mode", "none"]) == 0
    missing = str(tmp_path / "no.json")
    assert cli(["run", str(good), f"{module}:build", "--cassette", missing, "--cassette-mode", "none"]) == 2
    assert "does not exist and mode 'none' only replays" in capsys.readouterr().err


# --- other targets and inputs ---------------------------------------------------------------------------------


async def test_a_compiled_graph_and_message_inputs() -> None:
    from compose import END, START, Graph

    async def shout(messages: list[Message]) -> Message:
        return Message(role="assistant", content=messages[-1].content.upper())

    g = Graph[list[Message], Message]()
    g.add_lambda_node("shout", shout)
    g.add_edge(START, "shout")
    g.add_edge("shout", END)
    graph = g.compile()
    inputs = [Message(role="user", content="hi")]
    ds = Dataset("g", [Case("shout", inputs, expected_output="HI")], [ExactMatch()])
    report = await ds.evaluate(graph)
    assert report.passed and report.cases[0].runs[0].output == "HI"
    as_dicts = Dataset("a", [Case("hz", [{"role": "user", "content": "Weather in Hangzhou?"}])], [Contains("rain")])
    assert (await as_dicts.evaluate(build_agent())).passed
    bad_inputs = [Case("x", [{"role": "nobody"}]), Case("y", 3)]
    bad = await Dataset("b", bad_inputs, [Contains("rain")]).evaluate(build_agent())
    assert [c.error.split(":")[0] for c in bad.cases if c.error] == ["DatasetError", "DatasetError"]


async def test_a_run_that_pauses_fails_its_case() -> None:
    agent = ChatModelAgent(
        "trip", "trips", "Plan.", TripModel(), [get_weather], middlewares=[ApprovalMiddleware(lambda n, a: True)]
    )
    report = await Dataset("p", [Case("hz", "Weather in Hangzhou?")], [Contains("rain")]).evaluate(agent)
    assert "the run paused" in (report.cases[0].error or "")


class Forecast(BaseModel):
    city: str
    rain: bool


async def test_structured_output_is_the_output() -> None:
    args = json.dumps({"city": "Hangzhou", "rain": True})
    call = ToolCall(function=FunctionCall(name="final_answer", arguments=args))
    agent = ChatModelAgent("f", "forecasts", model=ScriptedChatModel([Message(role="assistant", tool_calls=[call])]))
    agent = ChatModelAgent("f", "forecasts", model=agent.model, output=OutputConfig(Forecast))
    case = Case("hz", "Rain?", expected_output={"city": "Hangzhou", "rain": True})
    ds = Dataset("s", [case], [ExactMatch(), MatchesSchema(Forecast)])
    report = await ds.evaluate(agent)
    assert report.passed, report.cases[0].reasons
    assert report.cases[0].runs[0].output == Forecast(city="Hangzhou", rain=True)
    assert json.loads(report.to_json())["cases"][0]["runs"][0]["output"] == {"city": "Hangzhou", "rain": True}


async def test_llm_judge_model_named_in_a_file() -> None:
    judge = LLMJudge("r", "tests.adk.test_evals:judge_model")  # a function returning the model
    assert (await judge.evaluate(ctx("x"))).value == 0.8
    for ref, message in [
        ("no_colon", "a model is named 'module:attr'"),
        ("no_such_module:x", "cannot import 'no_such_module:x'"),
        ("tests.adk.test_evals:CALLS", "is not a chat model"),
    ]:
        with pytest.raises(DatasetError, match=message):
            await LLMJudge("r", ref).evaluate(ctx("x"))
