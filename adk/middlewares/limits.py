"""The token budget and stall detection (seed 000) as the middleware they are: ``ChatModelAgent(limits=Limits(
max_budget_tokens=..., stall_window=...))`` puts a :class:`LimitsMiddleware` first on the agent's chain.

Before each model call (after the iteration check, before the other middlewares' rewrites) it records the tools
the previous answer of this run called, then ends the run with ``StallDetectedError`` when the last
``stall_window`` calls all called the same tool, or with ``TokenBudgetExceededError`` once the run's token usage
has reached ``max_budget_tokens``. The tools called so far are the run's (``ReactContext.tool_history``), kept
over a pause.
"""

from __future__ import annotations

from adk.chat_model._context import current_react
from adk.errors import StallDetectedError, TokenBudgetExceededError
from adk.middlewares.base import AgentMiddleware, ChatModelAgentState

__all__ = ["LimitsMiddleware"]


class LimitsMiddleware(AgentMiddleware):
    """End a run that has spent ``max_budget_tokens`` or called one tool ``stall_window`` times in a row."""

    def __init__(self, max_budget_tokens: int | None = None, stall_window: int | None = None) -> None:
        if stall_window is not None and stall_window < 1:
            raise ValueError(f"stall_window must be at least 1, got {stall_window}")
        self.max_budget_tokens = max_budget_tokens
        self.stall_window = stall_window

    def __repr__(self) -> str:
        return f"LimitsMiddleware(max_budget_tokens={self.max_budget_tokens}, stall_window={self.stall_window})"

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        run = current_react.get()
        if run is None:
            return state
        window = self.stall_window
        if window:
            # the calls of this run's previous answer (a first call's conversation holds earlier runs' only)
            if run.model_calls:
                for message in reversed(state.messages):
                    if message.role == "assistant":
                        if message.tool_calls:
                            run.tool_history += tuple(c.function.name for c in message.tool_calls)
                        break
            if len(run.tool_history) >= window:
                last = run.tool_history[-window:]
                if all(name == last[0] for name in last):
                    raise StallDetectedError(last[0], window)
        budget = self.max_budget_tokens
        if budget is not None and run.total_tokens >= budget:
            raise TokenBudgetExceededError(run.total_tokens, budget)
        return state
