"""``send_tool_gen_action``: a tool attaches an :class:`~adk.events.AgentAction` to its own tool event.

The action is stored in the ReAct state under the current tool call id (the tool name when there is none),
and the tool-result collector pops it when the call returns. So two concurrent calls of one tool carry their
own actions (Eino's ``SendToolGenAction``; seed 004).

Example::

    @tool
    async def finish(summary: str) -> str:
        await send_tool_gen_action(AgentAction(exit=True))
        return summary
"""

from __future__ import annotations

from adk.chat_model.react import State
from adk.events import AgentAction
from compose.state import process_state
from compose.tools.middleware import get_tool_call_id

__all__ = ["send_tool_gen_action"]


async def send_tool_gen_action(action: AgentAction, tool_name: str | None = None) -> None:
    """Attach ``action`` to the event of the tool call in progress.

    Args:
        action: the action (exit, transfer, break loop, customized, ...).
        tool_name: the key used when the call has no id (Eino's fallback to the tool name).

    Raises:
        ValueError: neither a tool call id nor ``tool_name`` is available.
        StateError: called outside a ChatModelAgent's run.
    """
    key = get_tool_call_id() or tool_name
    if not key:
        raise ValueError("send_tool_gen_action needs a tool call in progress or a tool_name")
    async with process_state(State) as st:
        st.tool_gen_actions[key] = action
