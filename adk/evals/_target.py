"""Running one case on what is evaluated: an agent, a Runner, or a compiled graph; what one run gives back."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from adk.errors import DatasetError
from adk.evals._evaluators import ToolCallRecord
from adk.evals._on_cassette import put_on_cassette, refuse_graph
from adk.runner import Runner
from compose.runnable import Runnable
from compose.schema import Message, user_message

__all__ = ["RunOutcome", "Target", "open_target", "run_case"]

Target = Any
"""An agent (``adk.Agent``: run with ``Runner(agent)``), a ``Runner`` (its streaming mode, stores and callbacks
apply), or a compiled graph (a ``Runnable``: ``invoke(case.input)``)."""


@dataclass(slots=True)
class RunOutcome:
    """What one run of a case gave: output (or error), trajectory, duration and tokens."""

    output: Any = None
    error: BaseException | None = None
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    duration: float = 0.0
    tokens: int = 0


async def open_target(target: Any, cassette: Any, stack: AsyncExitStack) -> Runner | Runnable[Any, Any]:
    """``target`` as a Runner or a Runnable. A function building one is called (with the cassette when it takes an
    argument); it may return an async context manager (``@asynccontextmanager`` around a ``yield agent``), entered
    on ``stack`` so that what it opened (a model's HTTP client) is closed after the evaluation. With a cassette,
    the agent's models (and, unless the function was given the cassette, its tools) are put on it for the
    evaluation (``adk.evals._on_cassette``).

    Raises:
        TypeError: ``target`` is none of an agent, a Runner, a compiled graph, or a function returning one.
        CassetteError: a cassette is given and a model of the target cannot be put on it.
    """
    built_on_it = False
    if isinstance(target, Runner | Runnable) or _is_agent(target):
        built: Any = target
    elif callable(target):
        built_on_it = cassette is not None and _takes_an_argument(target)
        built = target(cassette) if _takes_an_argument(target) else target()
        if callable(getattr(built, "__aenter__", None)) and not _is_agent(built):
            built = await stack.enter_async_context(built)
        if not (isinstance(built, Runner | Runnable) or _is_agent(built)):
            raise TypeError(
                f"adk.evals: {getattr(target, '__qualname__', target)!r} returned {type(built).__qualname__}, not "
                "an agent, a Runner or a compiled graph (Runnable)"
            )
    else:
        raise TypeError(
            f"adk.evals: cannot evaluate {type(target).__qualname__}: give an agent, a Runner, a compiled graph "
            "(Runnable), or a function returning one"
        )
    runner = built if isinstance(built, Runner | Runnable) else Runner(built)
    if cassette is not None:
        if isinstance(runner, Runner):
            stack.callback(put_on_cassette(runner.agent, cassette, built_on_it=built_on_it))
        elif not built_on_it:
            raise refuse_graph(cassette)
    return runner


def _is_agent(value: Any) -> bool:
    return isinstance(getattr(value, "name", None), str) and callable(getattr(value, "run", None))


def _takes_an_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def _messages(value: Any, case: str) -> list[Message]:
    if isinstance(value, str):
        return [user_message(value)]
    if isinstance(value, Sequence):
        out = []
        for i, m in enumerate(value):
            if isinstance(m, Message):
                out.append(m)
            elif isinstance(m, Mapping):
                try:
                    out.append(Message.model_validate(m))
                except ValueError as exc:
                    raise DatasetError(f"case '{case}': input[{i}] is not a message: {exc}") from None
            else:
                raise DatasetError(f"case '{case}': input[{i}] is {type(m).__qualname__}, not a message")
        return out
    raise DatasetError(
        f"case '{case}': an agent's input is a text or a list of messages, got {type(value).__qualname__}"
    )


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


async def run_case(target: Runner | Runnable[Any, Any], case_name: str, value: Any) -> RunOutcome:
    """Run ``value`` (a case's input) once on ``target``; a failure is the outcome's ``error``, never raised."""
    outcome = RunOutcome()
    start = time.perf_counter()
    try:
        if isinstance(target, Runner):
            await _run_agent(target, case_name, value, outcome)
        else:
            result = await target.invoke(value)
            outcome.output = result.content if isinstance(result, Message) else result
    except Exception as exc:
        outcome.error = exc
    outcome.duration = time.perf_counter() - start
    return outcome


async def _run_agent(runner: Runner, case_name: str, value: Any, outcome: RunOutcome) -> None:
    structured: Any = None
    async with runner.run(_messages(value, case_name)) as run:
        async for event in run:
            if event.error is not None:
                raise event.error
            if event.action is not None and event.action.interrupted is not None:
                ids = ", ".join(event.action.interrupted.ids)
                raise RuntimeError(f"the run paused (interrupts {ids}): evaluations run to the end")
            if event.internal or event.message is None:
                continue
            msg = await event.message.get_message()
            outcome.messages.append(msg)
            if msg.role == "assistant":
                calls = [ToolCallRecord(c.function.name, _arguments(c.function.arguments)) for c in msg.tool_calls]
                outcome.tool_calls += calls
            if event.output is not None and event.output.structured is not None:
                structured = event.output.structured
        final = run.final_message
        outcome.tokens = run.total_tokens
    outcome.output = structured if structured is not None else final.content if final is not None else None
