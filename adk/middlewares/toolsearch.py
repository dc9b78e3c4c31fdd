"""Tool search (Eino's ``adk/middlewares/dynamictool/toolsearch``): many tools, few offered.

``ToolSearchMiddleware(dynamic_tools)`` gives the agent the dynamic tools (they can run) and the ``tool_search``
tool (arguments ``query``, ``max_results``), but hides the dynamic tools from the model: before each model call
they are taken out of the offered tools, and a user message listing their names
(``<available-deferred-tools>``, marked in ``extra`` so it is added once) goes before the conversation. A
search answers ``{"matches":[...]}``; from the next model call of the run on, every tool a search in the
conversation matched is offered. Queries: keywords (scored on the name's parts, the name and the description;
``+word`` must match), or ``select:a,b`` for exact names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adk.middlewares._toolsearch_prompts import TOOL_SEARCH_DESCRIPTION
from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext, ChatModelAgentState
from compose.errors import ToolArgumentsError
from compose.schema import Message, ToolInfo, user_message
from compose.tools.arguments import SchemaTool, parse_arguments
from compose.tools.base import BaseTool

__all__ = ["TOOL_SEARCH_TOOL_NAME", "ToolSearchMiddleware", "search_tools"]

TOOL_SEARCH_TOOL_NAME = "tool_search"
REMINDER_KEY = "__toolsearch_reminder__"
DEFAULT_MAX_RESULTS = 5


def _split_camel(s: str) -> list[str]:
    parts: list[str] = []
    start = 0
    for i in range(1, len(s)):
        if s[i].isupper() and (s[i - 1].islower() or (i + 1 < len(s) and s[i + 1].islower())):
            parts.append(s[start:i])
            start = i
    parts.append(s[start:])
    return parts


def _name_parts(name: str) -> list[str]:
    return [p for seg in name.split("__") for up in seg.split("_") if up for p in _split_camel(up)]


def _keyword_search(query: str, max_results: int, tools: dict[str, ToolInfo]) -> list[str]:
    keywords = [(w[1:], True) if w.startswith("+") else (w, False) for w in query.split()]
    keywords = [(w, req) for w, req in keywords if w]
    scored: list[tuple[int, str]] = []
    for name, info in tools.items():
        parts = [p.lower() for p in _name_parts(name)]
        lname, ldesc = name.lower(), info.description.lower()
        total = 0
        for word, required in keywords:
            kw = word.lower()
            score = 0
            for part in parts:
                score = max(score, 10 if part == kw else 5 if kw in part else 0)
            if kw in lname:
                score = max(score, 3)
            if ldesc and kw in ldesc:
                score = max(score, 2)
            if required and score == 0:
                total = -1
                break
            total += score
        if total > 0:
            scored.append((-total, name))
    return [name for _, name in sorted(scored)[:max_results]]


_NOT_JSON = "failed to unmarshal tool search arguments"
_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": 'Query to find deferred tools. Use "select:<tool_name>" for direct selection, '
            "or keywords to search.",
        },
        "max_results": {"type": "integer", "description": "Maximum number of results to return (default: 5)"},
    },
    "required": ["query"],
}


def search_tools(arguments: str, tools: dict[str, ToolInfo]) -> list[str]:
    """The names the ``tool_search`` arguments match (Eino's ``search``).

    Raises:
        ToolArgumentsError: not a JSON object, an argument of the wrong type, or no query.
    """
    return _search(parse_arguments(TOOL_SEARCH_TOOL_NAME, arguments, _PARAMETERS, not_json=_NOT_JSON), tools)


def _search(args: dict[str, Any], tools: dict[str, ToolInfo]) -> list[str]:
    query = (args.get("query") or "").strip()  # the arguments' types are checked
    if not query:
        raise ToolArgumentsError(TOOL_SEARCH_TOOL_NAME, "query is required", field="query")
    if query.startswith("select:"):
        names = [n.strip() for n in query.removeprefix("select:").split(",")]
        return [n for n in names if n and n in tools]
    limit = args.get("max_results") or 0
    return _keyword_search(query, limit if limit > 0 else DEFAULT_MAX_RESULTS, tools)


class ToolSearchMiddleware(AgentMiddleware):
    """Hides ``dynamic_tools`` from the model until a ``tool_search`` finds them (see the module docstring).

    Raises:
        ValueError: no tools, or two with one name.
    """

    def __init__(self, dynamic_tools: Sequence[BaseTool]) -> None:
        if not dynamic_tools:
            raise ValueError("ToolSearchMiddleware: tools is required")
        self.dynamic_tools = list(dynamic_tools)
        self.infos: dict[str, ToolInfo] = {}
        for t in self.dynamic_tools:
            info = t.info()
            if info.name in self.infos:
                raise ValueError(f"duplicate dynamic tool name: {info.name}")
            self.infos[info.name] = info
        self.reminder = (
            "<available-deferred-tools>" + "".join(f"\n{n}" for n in self.infos) + "\n</available-deferred-tools>"
        )

        async def run(args: dict[str, Any]) -> str:
            return json.dumps({"matches": _search(args, self.infos) or None}, separators=(",", ":"))

        info = ToolInfo(name=TOOL_SEARCH_TOOL_NAME, description=TOOL_SEARCH_DESCRIPTION, parameters=_PARAMETERS)
        self.tool = SchemaTool(info, run, not_json=_NOT_JSON)

    def __repr__(self) -> str:
        return f"ToolSearchMiddleware({sorted(self.infos)})"

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        tools = [*context.tools, self.tool, *self.dynamic_tools]
        return ChatModelAgentContext(context.instruction, tools, set(context.return_directly))

    def _with_reminder(self, messages: list[Message]) -> list[Message]:
        if any(m.extra.get(REMINDER_KEY) is True for m in messages):
            return messages
        reminder = user_message(self.reminder).model_copy(update={"extra": {REMINDER_KEY: True}})
        at = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
        return [*messages[:at], reminder, *messages[at:]]

    async def before_model_rewrite_state(self, state: ChatModelAgentState) -> ChatModelAgentState:
        state.messages = self._with_reminder(list(state.messages))
        offered = [t for t in state.tool_infos if t.name not in self.infos]
        shown = {t.name for t in offered}
        for m in state.messages:
            if m.role != "tool" or m.tool_name != TOOL_SEARCH_TOOL_NAME:
                continue
            try:
                result: Any = json.loads(m.content)
            except ValueError:
                continue
            for name in (result.get("matches") or []) if isinstance(result, dict) else []:
                if name in self.infos and name not in shown:
                    offered.append(self.infos[name])
                    shown.add(name)
        state.tool_infos = offered
        return state
