"""The A2A agent card of a served agent: its name, description, skills (its tools and sub-agents) and the
interfaces it answers on (JSON-RPC, A2A 1.0 and 0.3, at the mount's URL)."""

from __future__ import annotations

from typing import Any

from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

from adk.agent import Agent

__all__ = ["PROTOCOL_VERSIONS", "agent_card", "skills"]

PROTOCOL_VERSIONS = ("1.0", "0.3")
"""The A2A versions every served agent answers (one JSON-RPC endpoint; the SDK routes 0.3's method names)."""


def _inner(agent: Any) -> Any:
    """The agent a flow or workflow wrapper runs (``FlowAgent.agent``), or the agent itself."""
    inner = getattr(agent, "agent", None)
    return inner if inner is not None and hasattr(inner, "name") else agent


def skills(agent: Agent) -> list[AgentSkill]:
    """One skill per tool of the agent (tag ``tool``) and per sub-agent (tag ``agent``); an agent with neither
    has one skill, itself."""
    found: list[AgentSkill] = []
    seen: set[str] = set()
    for candidate in (agent, _inner(agent)):
        config = getattr(candidate, "tools_config", None)
        for tool in getattr(config, "tools", ()) or ():
            info = tool.info()
            if info.name not in seen:
                seen.add(info.name)
                found.append(AgentSkill(id=info.name, name=info.name, description=info.description, tags=["tool"]))
        for sub in getattr(candidate, "sub_agents", ()) or ():
            if sub.name not in seen:
                seen.add(sub.name)
                found.append(
                    AgentSkill(id=sub.name, name=sub.name, description=sub.description or sub.name, tags=["agent"])
                )
    if not found:
        found.append(
            AgentSkill(id=agent.name, name=agent.name, description=agent.description or agent.name, tags=["agent"])
        )
    return found


def agent_card(
    agent: Agent, *, name: str, url: str, description: str | None = None, version: str = "1.0.0"
) -> AgentCard:
    """The card of ``agent`` served as ``name`` at ``url`` (streaming on, text in and out)."""
    return AgentCard(
        name=name,
        description=description or agent.description or name,
        version=version,
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v) for v in PROTOCOL_VERSIONS
        ],
        skills=skills(agent),
    )
