"""Prebuilt multi-agent patterns (Eino's ``adk/prebuilt``): a supervisor over sub-agents, plan-execute-replan, and
the deep agent."""

from adk.prebuilt.deep import SESSION_KEY_TODOS, DeepAgent, Todo, deep_agent
from adk.prebuilt.plan_execute import (
    EXECUTED_STEP_SESSION_KEY,
    EXECUTED_STEPS_SESSION_KEY,
    PLAN_SESSION_KEY,
    PLAN_TOOL,
    RESPOND_TOOL,
    USER_INPUT_SESSION_KEY,
    ExecutedStep,
    ExecutionContext,
    Plan,
    Planner,
    Replanner,
    new_executor,
    plan_execute,
)
from adk.prebuilt.supervisor import supervisor

__all__ = [
    "EXECUTED_STEPS_SESSION_KEY",
    "EXECUTED_STEP_SESSION_KEY",
    "PLAN_SESSION_KEY",
    "PLAN_TOOL",
    "RESPOND_TOOL",
    "SESSION_KEY_TODOS",
    "USER_INPUT_SESSION_KEY",
    "DeepAgent",
    "ExecutedStep",
    "ExecutionContext",
    "Plan",
    "Planner",
    "Replanner",
    "Todo",
    "deep_agent",
    "new_executor",
    "plan_execute",
    "supervisor",
]
