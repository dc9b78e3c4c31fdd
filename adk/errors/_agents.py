"""Errors of agents working together: instructions, transfers, plan-execute, remote A2A agents."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = ["InstructionFormatError", "PlanExecuteError", "RemoteAgentError", "TransferError"]


class InstructionFormatError(AgentError, ValueError):
    """Raised when an instruction cannot be filled from the session values (Eino's ``defaultGenModelInput``
    FString error): a placeholder naming no session value (``key``), a positional ``{}``/``{0}``, a lone ``{``
    or ``}``, a ``!r``-style conversion or a format spec the value does not accept.

    Attributes:
        agent_name: the agent whose instruction it is.
        key: the placeholder's field name (``None`` for a malformed instruction).
    """

    def __init__(self, problem: str, *, agent_name: str, key: str | None = None) -> None:
        super().__init__(
            f"agent {agent_name!r}: cannot fill the instruction from the session values: {problem}. Placeholders "
            "are filled whenever the run has session values; write a literal brace as '{{' or '}}' (e.g. in "
            "JSON), or give the agent an instruction without placeholders"
        )
        self.agent_name = agent_name
        self.key = key


class TransferError(AgentError):
    """A transfer named an agent that is neither a sub-agent nor the parent of the agent transferring (Eino's
    message); ``.dest`` and ``.source`` name both."""

    def __init__(self, dest: str, source: str) -> None:
        super().__init__(f"transfer failed: agent '{dest}' not found when transferring from '{source}'")
        self.dest = dest
        self.source = source


class PlanExecuteError(AgentError):
    """A planner or replanner answer that is not a plan or a response (names the agent and what was wrong)."""


class RemoteAgentError(AgentError):
    """A remote A2A agent (``adk.agents.RemoteA2AAgent``) could not be reached, answered with an error, or
    ended its task ``failed``/``rejected``/``canceled``; ``.url`` names the server, ``.task_id`` and ``.state``
    the remote task (when there was one); the client's exception, if any, is the ``__cause__``."""

    reason = "remote"

    def __init__(self, url: str, message: str, *, task_id: str | None = None, state: str | None = None) -> None:
        where = f" (task {task_id!r}, {state})" if task_id and state else f" (task {task_id!r})" if task_id else ""
        super().__init__(f"remote A2A agent at {url}{where}: {message}")
        self.url = url
        self.task_id = task_id
        self.state = state
