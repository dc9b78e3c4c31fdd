"""Putting an agent that is already built on an evaluation's cassette: its models (and tools) answered by it.

``evaluate(agent, cassette=tape)`` promises that a replay calls no model. An agent built without the cassette
(given ready, or by a function that does not take the cassette) gets, for the evaluation, every model of its tree
wrapped (``tape.wrap``): a ``ChatModelAgent``'s model and failover models, through workflow agents, flow agents
(sub-agents) and agent tools; and its tools (``tape.wrap_tool``; an ``AgentTool`` stays, its agent is put on the
cassette). The swaps are made on the agents themselves and undone when the evaluation ends. What cannot be
wrapped (a model chosen by ``get_failover_model``, a model held by a middleware, an agent of another kind, a
compiled graph) refuses the evaluation with a :class:`~compose.errors.CassetteError` naming it.

An agent built by a function given the cassette keeps its tools as the function chose; its models are still all
put on the cassette, and what cannot be seen into is trusted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from adk.agents.agent_tool import AgentTool
from adk.agents.flow import DeterministicTransfer, FlowAgent
from adk.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
from adk.chat_model.agent import ChatModelAgent
from compose.errors import CassetteError
from compose.testing.cassette import Cassette, CassetteChatModel
from compose.tools.base import BaseTool

__all__ = ["put_on_cassette", "refuse_graph"]

_CONTAINERS = (FlowAgent, DeterministicTransfer, SequentialAgent, ParallelAgent, LoopAgent)


def put_on_cassette(agent: Any, tape: Cassette, *, built_on_it: bool) -> Callable[[], None]:
    """Put ``agent``'s tree on ``tape`` (see the module docstring); returns the function undoing it.

    Args:
        built_on_it: the agent was built by a function given ``tape``: its tools are left as they are, and
            what cannot be wrapped is trusted rather than refused.

    Raises:
        CassetteError: ``built_on_it`` is false and a model or an agent of the tree cannot be put on the cassette.
    """
    swaps = _Swaps(tape, wrap_tools=not built_on_it, strict=not built_on_it)
    try:
        swaps.agent(agent, f"agent '{getattr(agent, 'name', '?')}'")
    except BaseException:
        swaps.undo()
        raise
    return swaps.undo


def refuse_graph(tape: Cassette) -> CassetteError:
    """The error for a compiled graph given ready with a cassette: nothing in it can be seen to wrap."""
    return CassetteError(
        f"adk.evals: cannot put a compiled graph on cassette {tape.path}: its models cannot be reached; give "
        "evaluate a function that takes the cassette and builds the graph with cassette.wrap(model)"
    )


class _Swaps:
    def __init__(self, tape: Cassette, *, wrap_tools: bool, strict: bool) -> None:
        self.tape = tape
        self.wrap_tools = wrap_tools
        self.strict = strict
        self._done: list[tuple[object, str, object]] = []
        self._seen: set[int] = set()

    def undo(self) -> None:
        while self._done:
            obj, attr, old = self._done.pop()
            setattr(obj, attr, old)

    def _set(self, obj: object, attr: str, value: object) -> None:
        self._done.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)

    def _refuse(self, what: str) -> None:
        if self.strict:
            raise CassetteError(
                f"adk.evals: cannot put {what} on cassette {self.tape.path}, so a replay could call a real model; "
                "give evaluate a function that takes the cassette and builds the agent with cassette.wrap(model)"
            )

    def _model(self, model: Any) -> Any:
        if isinstance(model, CassetteChatModel) and model.cassette is self.tape:
            return model
        return self.tape.wrap(model)

    def agent(self, agent: Any, where: str) -> None:
        if id(agent) in self._seen:
            return
        self._seen.add(id(agent))
        if isinstance(agent, ChatModelAgent):
            self._chat_model_agent(agent, f"agent '{agent.name}'")
        elif isinstance(agent, _CONTAINERS):
            inner = getattr(agent, "agent", None)
            if inner is not None:
                self.agent(inner, f"agent '{inner.name}'")
            for sub in getattr(agent, "sub_agents", ()):
                self.agent(sub, f"agent '{sub.name}'")
        else:
            self._refuse(f"{where} ({type(agent).__qualname__}: not an agent whose models can be reached)")

    def _chat_model_agent(self, agent: ChatModelAgent, where: str) -> None:
        before = len(self._done)
        model = self._model(agent.model)
        if model is not agent.model:
            self._set(agent, "model", model)
        failover = agent.model_config.failover
        if failover is not None:
            if failover.get_failover_model is not None:
                self._refuse(f"{where}: the models its get_failover_model picks")
            else:
                models = [self._model(m) for m in failover.models]
                if any(a is not b for a, b in zip(models, failover.models, strict=True)):
                    config = dataclasses.replace(
                        agent.model_config, failover=dataclasses.replace(failover, models=models)
                    )
                    self._set(agent, "model_config", config)
        for i, mw in enumerate(agent.middlewares):
            held = [k for k, v in vars(mw).items() if _is_model(v) and not isinstance(v, CassetteChatModel)]
            if held:
                self._refuse(f"{where}: middlewares[{i}] ({type(mw).__qualname__}) holds a model in {held[0]!r}")
        tools: list[BaseTool] = []
        for tool in agent.tools_config.tools:
            if isinstance(tool, AgentTool):
                self.agent(tool.agent, f"agent '{tool.agent.name}'")
                tools.append(tool)
            elif self.wrap_tools and getattr(tool, "cassette", None) is not self.tape:
                tools.append(self.tape.wrap_tool(tool))
            else:
                tools.append(tool)
        if any(a is not b for a, b in zip(tools, agent.tools_config.tools, strict=True)):
            self._set(agent, "tools_config", dataclasses.replace(agent.tools_config, tools=tools))
        if len(self._done) > before and agent._runnable is not None:  # built on the old model: again, then restored
            self._set(agent, "_runnable", None)
            self._set(agent, "_run_tools", None)


def _is_model(value: Any) -> bool:
    return callable(getattr(value, "generate", None)) and callable(getattr(value, "stream", None))
