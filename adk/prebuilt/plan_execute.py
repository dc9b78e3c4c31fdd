"""Plan, execute, replan (Eino's ``prebuilt/planexecute``): a planner makes a plan, then a loop runs an executor on
the plan's first step and a replanner that either revises the plan (the ``plan`` tool: the steps still to do) or
answers (the ``respond`` tool), which breaks the loop.

Everything the three agents share lives in the run's session values, as JSON data (so a paused run saves it):
:data:`USER_INPUT_SESSION_KEY` (the user's messages), :data:`PLAN_SESSION_KEY` (``{"steps": [...]}``),
:data:`EXECUTED_STEP_SESSION_KEY` (the executor's last answer, its ``output_key``) and
:data:`EXECUTED_STEPS_SESSION_KEY` (``[{"step", "result"}, ...]``).

Example::

    agent = plan_execute(
        Planner(planner_model),
        new_executor(executor_model, tools=[search]),
        Replanner(replanner_model),
    )
    async for event in Runner(agent).query("Plan a day in Hangzhou"):
        ...
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from adk.agent import AgentContext, AgentEvents
from adk.agents.workflow import LoopAgent, SequentialAgent
from adk.chat_model.agent import ChatModelAgent, ToolsConfig
from adk.errors import PlanExecuteError
from adk.events import AgentAction, AgentEvent, AgentInput, AgentOutput, MessageVariant
from compose.lowlevel import format_fstring
from compose.models.base import ChatModel
from compose.prompt import ChatTemplate, MessagesPlaceholder
from compose.schema import Message, ToolInfo, assistant_message, system_message, user_message
from compose.stream import SKIP, SkipType, StreamReader, concat
from compose.tools.base import BaseTool

__all__ = [
    "EXECUTED_STEPS_SESSION_KEY",
    "EXECUTED_STEP_SESSION_KEY",
    "PLAN_SESSION_KEY",
    "PLAN_TOOL",
    "RESPOND_TOOL",
    "USER_INPUT_SESSION_KEY",
    "ExecutedStep",
    "ExecutionContext",
    "Plan",
    "PlanExecuteError",
    "Planner",
    "Replanner",
    "new_executor",
    "plan_execute",
]

USER_INPUT_SESSION_KEY = "UserInput"
PLAN_SESSION_KEY = "Plan"
EXECUTED_STEP_SESSION_KEY = "ExecutedStep"
EXECUTED_STEPS_SESSION_KEY = "ExecutedSteps"

PLAN_TOOL = ToolInfo(
    name="plan",
    description="Lay out the steps to carry out, in order; each step concrete enough to execute on its own.",
    parameters={
        "type": "object",
        "properties": {
            "steps": {"type": "array", "items": {"type": "string"}, "description": "the steps, in execution order"}
        },
        "required": ["steps"],
    },
)
RESPOND_TOOL = ToolInfo(
    name="respond",
    description="Answer the user directly, once everything needed for the final answer is known.",
    parameters={
        "type": "object",
        "properties": {"response": {"type": "string", "description": "the complete answer for the user"}},
        "required": ["response"],
    },
)

_PLANNER_SYSTEM = (
    "You plan. Given an objective, break it into a short sequence of concrete, self-contained steps that, done in "
    "order, achieve it; the last step yields the answer. Call the plan tool with the steps."
)
_EXECUTOR_SYSTEM = "You execute plans step by step, carefully, using your tools where they help."
_EXECUTOR_USER = (
    "## OBJECTIVE\n{input}\n## PLAN\n{plan}\n## COMPLETED STEPS AND RESULTS\n{executed_steps}\n"
    "## YOUR TASK: execute the first step, which is:\n{step}"
)
_REPLANNER_SYSTEM = (
    "You review progress toward an objective and choose exactly one action: if the objective is met, call "
    "'{respond_tool}' with the final answer; otherwise call '{plan_tool}' with the steps that remain (not the "
    "completed ones), revised with what the results taught."
)
_REPLANNER_USER = "## OBJECTIVE\n{input}\n## PLAN\n{plan}\n## COMPLETED STEPS AND RESULTS\n{executed_steps}"


class Plan(BaseModel):
    """The default plan: the steps still to do, in order."""

    steps: list[str]

    @property
    def first_step(self) -> str:
        return self.steps[0] if self.steps else ""


@dataclass(frozen=True, slots=True)
class ExecutedStep:
    step: str
    result: str


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """What the executor's and the replanner's prompts are made from."""

    user_input: list[Message]
    plan: Plan
    executed_steps: list[ExecutedStep]


GenPlannerInput = Callable[[list[Message]], Awaitable[list[Message]]]
GenInput = Callable[[ExecutionContext], Awaitable[list[Message]]]
GenExecutorInput = Callable[[ExecutionContext], list[Message]]


def _format_input(messages: Sequence[Message]) -> str:
    return "".join(f"{m.content}\n" for m in messages)


def _format_steps(steps: Sequence[ExecutedStep]) -> str:
    return "".join(f"Step: {s.step}\nResult: {s.result}\n\n" for s in steps)


def _context(values: Mapping[str, Any], agent: str) -> ExecutionContext:
    try:
        user_input = [Message.model_validate(m) for m in values[USER_INPUT_SESSION_KEY]]
        plan = Plan.model_validate(values[PLAN_SESSION_KEY])
    except KeyError as exc:
        raise PlanExecuteError(
            f"agent '{agent}': session value {exc.args[0]!r} is missing (run the planner first)"
        ) from exc
    steps = [ExecutedStep(s["step"], s["result"]) for s in values.get(EXECUTED_STEPS_SESSION_KEY, [])]
    return ExecutionContext(user_input, plan, steps)


async def _default_planner_input(user_input: list[Message]) -> list[Message]:
    template = ChatTemplate.from_messages("f-string", system_message(_PLANNER_SYSTEM), MessagesPlaceholder("input"))
    return await template.format({"input": user_input})


def _default_executor_input(ec: ExecutionContext) -> list[Message]:
    values = {
        "input": _format_input(ec.user_input),
        "plan": ec.plan.model_dump_json(),
        "executed_steps": _format_steps(ec.executed_steps),
        "step": ec.plan.first_step,
    }
    return [system_message(_EXECUTOR_SYSTEM), user_message(format_fstring(_EXECUTOR_USER, values))]


def _arguments_view(message: Message) -> Message | SkipType:
    """A streamed chunk as the event shows it: the tool call's argument text as content (Eino's argToContent)."""
    if not message.tool_calls:
        return SKIP
    return assistant_message(message.tool_calls[0].function.arguments)


async def _call(
    model: ChatModel, messages: list[Message], streaming: bool, tool: str
) -> tuple[AgentEvent, Message | None, StreamReader[Message] | None]:
    """Call the model forcing ``tool``; return the event to send and the whole answer (or a stream to concat)."""
    if streaming:
        reader = await model.stream(messages, tool_choice=tool)
        mine, theirs = reader.copy(2)
        shown = theirs.map(_arguments_view)
        event = AgentEvent(output=AgentOutput(MessageVariant(True, message_stream=shown)))
        return event, None, mine
    answer = await model.generate(messages, tool_choice=tool)
    content = answer.tool_calls[0].function.arguments if answer.tool_calls else answer.content
    return AgentEvent(output=AgentOutput(MessageVariant(False, assistant_message(content)))), answer, None


async def _whole(answer: Message | None, stream: StreamReader[Message] | None) -> Message:
    """The model's whole answer: as given, or its stream concatenated (and closed)."""
    if answer is not None:
        return answer
    assert stream is not None
    try:
        return await concat(stream)
    finally:
        await stream.aclose()


def _parse_plan(arguments: str, agent: str) -> Plan:
    try:
        return Plan.model_validate_json(arguments)
    except ValidationError as exc:
        raise PlanExecuteError(f"agent '{agent}': the plan is not {{\"steps\": [string, ...]}}: {arguments!r}") from exc


class Planner:
    """Makes the first plan: calls the model with the ``plan`` tool forced and stores the plan.

    Args:
        model: the chat model (given the plan tool).
        tool_info: the plan tool to offer (``PLAN_TOOL`` by default).
        gen_input: ``async (user_input) -> messages`` building the model's input.
    """

    name = "planner"
    description = "a planner agent"

    def __init__(
        self, model: ChatModel, *, tool_info: ToolInfo = PLAN_TOOL, gen_input: GenPlannerInput | None = None
    ) -> None:
        self.model = model.with_tools([tool_info])
        self.tool_info = tool_info
        self.gen_input = gen_input or _default_planner_input

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return self._run(input, ctx)

    async def _run(self, input: AgentInput, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
        values = ctx.session.values
        user_input = list(input.messages)
        values[USER_INPUT_SESSION_KEY] = [m.model_dump(mode="json") for m in user_input]
        try:
            event, answer, stream = await _call(
                self.model, await self.gen_input(user_input), ctx.session.enable_streaming, self.tool_info.name
            )
        except Exception as exc:
            yield AgentEvent(error=exc)
            return
        try:
            yield event
            answer = await _whole(answer, stream)
            if not answer.tool_calls:
                raise PlanExecuteError(f"agent '{self.name}': the model did not call the '{self.tool_info.name}' tool")
            plan = _parse_plan(answer.tool_calls[0].function.arguments, self.name)
        except Exception as exc:
            yield AgentEvent(error=exc)
            return
        finally:
            if stream is not None:  # also when the consumer stops at the event
                await stream.aclose()
        values[PLAN_SESSION_KEY] = plan.model_dump(mode="json")


class _Executor(ChatModelAgent):
    """A ChatModelAgent whose input is the plan's first step in context (Eino's executor's ``GenModelInput``)."""

    def __init__(self, *args: Any, gen_input: GenExecutorInput, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gen_input = gen_input

    def model_input(self, input: AgentInput, session_values: Mapping[str, Any] | None = None) -> list[Message]:
        return self.gen_input(_context(session_values or {}, self.name))


def new_executor(
    model: ChatModel,
    tools: ToolsConfig | Sequence[BaseTool] | None = None,
    *,
    max_iterations: int = 20,
    gen_input: GenExecutorInput | None = None,
    **agent_options: Any,
) -> ChatModelAgent:
    """The executor: a ChatModelAgent named ``executor`` that carries out the plan's first step with its tools and
    stores its answer under :data:`EXECUTED_STEP_SESSION_KEY` (its ``output_key``)."""
    return _Executor(
        "executor",
        "an executor agent",
        model=model,
        tools=tools,
        max_iterations=max_iterations,
        output_key=EXECUTED_STEP_SESSION_KEY,
        gen_input=gen_input or _default_executor_input,
        **agent_options,
    )


class Replanner:
    """Records the executed step, then asks the model (``plan`` or ``respond`` forced): a new plan replaces the
    old one; a response ends the loop with a ``BreakLoopAction``.

    Args:
        model: the chat model (given both tools).
        plan_tool, respond_tool: the tools to offer.
        gen_input: ``async (ExecutionContext) -> messages`` building the model's input.
    """

    name = "replanner"
    description = "a replanner agent"

    def __init__(
        self,
        model: ChatModel,
        *,
        plan_tool: ToolInfo = PLAN_TOOL,
        respond_tool: ToolInfo = RESPOND_TOOL,
        gen_input: GenInput | None = None,
    ) -> None:
        self.model = model.with_tools([plan_tool, respond_tool])
        self.plan_tool = plan_tool
        self.respond_tool = respond_tool
        self.gen_input = gen_input or self._default_input

    async def _default_input(self, ec: ExecutionContext) -> list[Message]:
        system = _REPLANNER_SYSTEM.format(respond_tool=self.respond_tool.name, plan_tool=self.plan_tool.name)
        template = ChatTemplate.from_messages(
            "f-string", system_message(system.replace("{", "{{").replace("}", "}}")), user_message(_REPLANNER_USER)
        )
        return await template.format(
            {
                "input": _format_input(ec.user_input),
                "plan": ec.plan.model_dump_json(),
                "executed_steps": _format_steps(ec.executed_steps),
            }
        )

    def run(self, input: AgentInput, ctx: AgentContext) -> AgentEvents:
        return self._run(ctx)

    async def _run(self, ctx: AgentContext) -> AsyncGenerator[AgentEvent, None]:
        values = ctx.session.values
        stream: StreamReader[Message] | None = None
        try:
            ec = _context(values, self.name)
            result = values.get(EXECUTED_STEP_SESSION_KEY)
            if not isinstance(result, str):
                raise PlanExecuteError(f"agent '{self.name}': no executed step to review (run the executor first)")
            steps = [*ec.executed_steps, ExecutedStep(ec.plan.first_step, result)]
            values[EXECUTED_STEPS_SESSION_KEY] = [{"step": s.step, "result": s.result} for s in steps]
            ec = ExecutionContext(ec.user_input, ec.plan, steps)
            event, answer, stream = await _call(
                self.model, await self.gen_input(ec), ctx.session.enable_streaming, "required"
            )
        except Exception as exc:
            yield AgentEvent(error=exc)
            return
        try:
            yield event
            answer = await _whole(answer, stream)
            if not answer.tool_calls:
                raise PlanExecuteError(
                    f"agent '{self.name}': the model called neither '{self.plan_tool.name}' nor "
                    f"'{self.respond_tool.name}'"
                )
            called = answer.tool_calls[0].function
            if called.name == self.respond_tool.name:
                action = AgentAction.new_break_loop(self.name)
            elif called.name == self.plan_tool.name:
                values[PLAN_SESSION_KEY] = _parse_plan(called.arguments, self.name).model_dump(mode="json")
                action = None
            else:
                raise PlanExecuteError(f"agent '{self.name}': unexpected tool call '{called.name}'")
        except Exception as exc:
            yield AgentEvent(error=exc)
            return
        finally:
            if stream is not None:
                await stream.aclose()
        if action is not None:
            yield AgentEvent(action=action)


def plan_execute(planner: Any, executor: Any, replanner: Any, *, max_iterations: int = 10) -> SequentialAgent:
    """``planner``, then a loop (``execute_replan``, at most ``max_iterations`` rounds; 10 when not positive) of
    ``executor`` and ``replanner``: Eino's ``planexecute.New``."""
    loop = LoopAgent(
        "execute_replan",
        "executes the plan and replans",
        [executor, replanner],
        max_iterations=max_iterations if max_iterations > 0 else 10,
    )
    return SequentialAgent("plan_execute_replan", "plans, executes and replans", [planner, loop])
