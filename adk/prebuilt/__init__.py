"""Prebuilt multi-agent patterns (Eino's ``adk/prebuilt``): a supervisor over sub-agents, and plan-execute-replan."""

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
    "USER_INPUT_SESSION_KEY",
    "ExecutedStep",
    "ExecutionContext",
    "Plan",
    "Planner",
    "Replanner",
    "new_executor",
    "plan_execute",
    "supervisor",
]
