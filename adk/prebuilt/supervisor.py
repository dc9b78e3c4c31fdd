"""The supervisor pattern (Eino's ``prebuilt/supervisor``): a supervisor agent transfers to its sub-agents, and
each sub-agent, when it is done, transfers back to the supervisor deterministically (no model call decides it).

Example::

    boss = ChatModelAgent("supervisor", "routes work", "Delegate to the right agent.", model=model)
    team = supervisor(boss, [researcher, writer])
    async for event in Runner(team).query("write a note on Hangzhou's weather"):
        ...
"""

from __future__ import annotations

from collections.abc import Sequence

from adk.agent import Agent
from adk.agents.flow import FlowAgent, agent_with_deterministic_transfer_to, set_sub_agents

__all__ = ["supervisor"]


def supervisor(supervisor: Agent, sub_agents: Sequence[Agent]) -> FlowAgent:
    """``supervisor`` with ``sub_agents`` that hand back to it when they end (not when they exit or pause).

    Raises:
        ValueError, TypeError: as :func:`~adk.agents.flow.set_sub_agents`.
    """
    back = [agent_with_deterministic_transfer_to(a, [supervisor.name]) for a in sub_agents]
    return set_sub_agents(supervisor, back)
