"""ChatModelAgent's grouped options (adk.chat_model.config): the old keyword arguments still work for one release,
each with a DeprecationWarning naming its new spelling, and build the same agent."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from adk.chat_model.agent import ChatModelAgent
from adk.chat_model.config import Limits, ModelConfig, OutputConfig, ToolsConfig
from adk.chat_model.failover import ModelFailoverConfig
from adk.middlewares.approval import ApprovalMiddleware
from adk.middlewares.limits import LimitsMiddleware
from compose.models import ScriptedChatModel
from compose.tools import tool


@tool
def ping() -> str:
    """Ping."""
    return "pong"


class Answer(BaseModel):
    text: str


BACKUP = ScriptedChatModel(["b"])
FAILOVER = ModelFailoverConfig(models=[BACKUP])


def needs_approval(name: str, arguments: str) -> bool:
    return name == "ping"


def shape(agent: ChatModelAgent) -> tuple[Any, ...]:
    """What an option changes in the agent."""
    mws = tuple(
        (type(m).__name__, getattr(m, "needs_approval", None), getattr(m, "stall_window", None))
        for m in agent.middlewares
    )
    out = agent._output
    return (
        agent.model_config,
        agent.limits,
        agent.output_config,
        agent.tools_config.execution_mode,
        mws,
        None if out is None else (out.mode, out.fallback),
    )


OLD_AND_NEW: list[tuple[str, Any, dict[str, Any], str]] = [
    ("model_failover", FAILOVER, {"model_config": ModelConfig(failover=FAILOVER)}, "ModelConfig(failover=...)"),
    ("tool_choice", "required", {"model_config": ModelConfig(tool_choice="required")}, "ModelConfig(tool_choice="),
    ("tool_execution_mode", "serial", {"tools": ToolsConfig([ping], execution_mode="serial")}, "execution_mode="),
    ("max_budget_tokens", 10, {"limits": Limits(max_budget_tokens=10)}, "Limits(max_budget_tokens=...)"),
    ("stall_window", 3, {"limits": Limits(stall_window=3)}, "Limits(stall_window=...)"),
    ("timeout", 5.0, {"limits": Limits(timeout=5.0)}, "Limits(timeout=...)"),
    ("approval", needs_approval, {"middlewares": [ApprovalMiddleware(needs_approval)]}, "ApprovalMiddleware"),
    ("output_type", Answer, {"output": OutputConfig(Answer)}, "OutputConfig(type=...)"),
    ("output_retries", 1, {"output": OutputConfig(retries=1)}, "OutputConfig(retries=...)"),
    ("output_mode", "tool", {"output": OutputConfig(mode="tool")}, "OutputConfig(mode=...)"),
]


@pytest.mark.parametrize(("old", "value", "new", "spelling"), OLD_AND_NEW, ids=[o[0] for o in OLD_AND_NEW])
def test_an_old_keyword_warns_with_its_new_spelling_and_builds_the_same_agent(
    old: str, value: Any, new: dict[str, Any], spelling: str
) -> None:
    with pytest.warns(DeprecationWarning, match=rf"ChatModelAgent\({old}=\.\.\.\) is deprecated: use .*") as record:
        before = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), tools=[ping], **{old: value})
    assert spelling in str(record[0].message)
    assert record[0].filename == __file__  # the warning points at the caller
    after = ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), **{"tools": [ping], **new})
    assert shape(before) == shape(after)


def test_old_keywords_merge_into_the_given_groups() -> None:
    with pytest.warns(DeprecationWarning):
        agent = ChatModelAgent(
            "a", "d", model=ScriptedChatModel(["x"]), limits=Limits(timeout=5.0), stall_window=2, output_type=Answer
        )
    assert agent.limits == Limits(stall_window=2, timeout=5.0)
    assert agent.output_config == OutputConfig(Answer)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_iteration'"):
        ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), max_iteration=3)


def test_the_groups_are_checked() -> None:
    with pytest.raises(ValueError, match=r"Limits\(stall_window=...\) must be at least 1, got 0"):
        Limits(stall_window=0)
    with pytest.raises(ValueError, match="execution_mode"):
        ToolsConfig(execution_mode="fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ModelConfig\(failover=...\) must be a ModelFailoverConfig"):
        ModelConfig(failover=BACKUP)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="agent 'a': limits must be a Limits, got int"):
        ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), limits=3)  # type: ignore[arg-type]


def test_limits_are_a_middleware_first_on_the_chain() -> None:
    """The budget and stall checks end a run before any other middleware's rewrite."""
    mw = ApprovalMiddleware(needs_approval)
    agent = ChatModelAgent(
        "a",
        "d",
        model=ScriptedChatModel(["x"]),
        middlewares=[mw],
        limits=Limits(max_budget_tokens=5, stall_window=2, timeout=1.0),
        before_chat_model=[lambda s: None],
    )
    first, hooks, guard = agent.middlewares
    assert isinstance(first, LimitsMiddleware) and (first.max_budget_tokens, first.stall_window) == (5, 2)
    assert type(hooks).__name__ == "ChatModelHooks" and guard is mw
    # a timeout alone bounds the run (the driver's deadline): no middleware
    assert ChatModelAgent("a", "d", model=ScriptedChatModel(["x"]), limits=Limits(timeout=1.0)).middlewares == ()


def test_the_approval_module_keeps_its_old_name() -> None:
    import adk.chat_model.approval as old
    import adk.middlewares.approval as new

    assert old.ApprovalMiddleware is new.ApprovalMiddleware and old.ApprovalDecision is new.ApprovalDecision
