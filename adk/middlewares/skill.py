"""Skills (Eino's ``adk/middlewares/skill``): ``SKILL.md`` files whose YAML front matter names and describes them,
listed in the ``skill`` tool's description and loaded by it on demand.

A skill is a directory under the skills directory holding ``SKILL.md``::

    ---
    name: pdf
    description: Extract text and tables from PDF files
    context: fork          # optional: inline (default), fork, fork_with_context
    agent: reader          # for fork modes: the agent that runs it (a key of ``agents``)
    model: small           # a key of ``models``: the fork's agent factory gets it; inline, later calls use it
    ---
    Step-by-step instructions...

The instruction gets Eino's Skills System prompt; the ``skill`` tool (argument ``skill``) lists every skill as
``<available_skills>`` in its description, re-read from the backend at the start of each run. Calling it:

* ``inline`` (the default): the tool answers ``Launching skill: <name>`` and the skill's text with its base
  directory, for the model to follow; with a ``model``, the run's later model calls go to that model (Eino's
  ModelHub swap: the middleware's ``wrap_model`` calls it, with the run's tools, instead of the model it wraps);
* ``fork``: the skill's agent runs on one user message, the skill's text, without the parent's history;
* ``fork_with_context``: the agent runs on the parent's conversation plus the skill's text as the tool call's
  result; both fork modes answer Eino's ``Skill "<name>" completed (sub-agent execution).`` with the texts of
  the agent's messages.

Front matter is parsed by PyYAML's safe loader (extra ``skills``): a tag such as ``!!python/object`` is refused,
and so are aliases (``*name``: an alias bomb expands a few lines into gigabytes), front matter over 64 KiB, and
front matter that is not a mapping with a string ``name`` and ``description`` or names an unknown ``context``,
each with :class:`~adk.errors.SkillError` naming the skill's file. A skills directory given as a path must exist.
Where pyeino differs: a fork's agent cannot pause (an interrupt inside it fails the call).
"""

from __future__ import annotations

import os
import posixpath
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adk.agent import Agent, RunSession
from adk.chat_model._context import ReactContext, current_react
from adk.errors import SkillError
from adk.events import AgentInput
from adk.middlewares import _skill_prompts as prompts
from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext, ModelWrapper
from adk.middlewares.filesystem import Backend, LocalBackend
from compose.models.base import ChatModel
from compose.schema import Message, ToolInfo, tool_message, user_message
from compose.stream import StreamReader
from compose.tools.arguments import SchemaTool
from compose.tools.middleware import get_tool_call_id

__all__ = ["CONTEXT_MODES", "Skill", "SkillMiddleware", "load_skills", "parse_skill"]

CONTEXT_MODES = ("inline", "fork", "fork_with_context")
SKILL_FILE = "SKILL.md"
AgentFactory = Callable[[ChatModel | None], Agent]
MAX_FRONT_MATTER_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class Skill:
    """A parsed ``SKILL.md``: its front matter, its text (trimmed) and its directory (a virtual path)."""

    name: str
    description: str
    content: str
    base_directory: str
    context: str = "inline"
    agent: str = ""
    model: str = ""


def _yaml_safe_load(text: str, path: str) -> Any:
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError(
            "SkillMiddleware parses SKILL.md front matter with PyYAML: pip install 'pyeino[skills]'"
        ) from exc

    class NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, "aliases are not allowed in front matter", mark)
            return super().compose_node(parent, index)

    if len(text) > MAX_FRONT_MATTER_CHARS:
        raise SkillError(
            f"skill file {path}: front matter is longer than {MAX_FRONT_MATTER_CHARS} characters", path=path
        )
    try:
        return yaml.load(text, Loader=NoAliasLoader)  # a SafeLoader that also refuses aliases
    except yaml.YAMLError as exc:
        raise SkillError(f"skill file {path}: front matter is not safe YAML: {exc}", path=path) from exc


def parse_skill(text: str, path: str) -> Skill:
    """Parse the ``SKILL.md`` at (virtual) ``path``.

    Raises:
        SkillError: no ``---`` front matter, unsafe or malformed YAML, a missing name or description, or an
            unknown context mode.
    """
    data = text.strip()
    if not data.startswith("---"):
        raise SkillError(f"skill file {path}: file does not start with frontmatter delimiter", path=path)
    rest = data[3:]
    end = rest.find("\n---")
    if end == -1:
        raise SkillError(f"skill file {path}: frontmatter closing delimiter not found", path=path)
    front = _yaml_safe_load(rest[:end].strip(), path)
    content = rest[end + 4 :].removeprefix("\n")
    if not isinstance(front, dict):
        raise SkillError(f"skill file {path}: front matter must be a mapping, got {type(front).__name__}", path=path)
    fields: dict[str, str] = {}
    for key in ("name", "description", "context", "agent", "model"):
        value = front.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):  # its type only: a value can be huge
            raise SkillError(f"skill file {path}: '{key}' must be a string, got a {type(value).__name__}", path=path)
        fields[key] = value.strip()
    skill_name = fields["name"]
    if not skill_name or not fields["description"]:
        raise SkillError(f"skill file {path}: front matter needs a name and a description", skill=skill_name, path=path)
    mode = fields["context"] or "inline"
    if mode not in CONTEXT_MODES:
        raise SkillError(
            f"skill '{skill_name}' ({path}): context must be one of {list(CONTEXT_MODES)}, got {mode!r}",
            skill=skill_name,
            path=path,
        )
    return Skill(
        skill_name,
        fields["description"],
        content.strip(),
        posixpath.dirname(path),
        mode,
        fields["agent"],
        fields["model"],
    )


async def load_skills(backend: Backend, base_dir: str = "/") -> list[Skill]:
    """Every ``<base_dir>/*/SKILL.md`` of ``backend``, parsed, sorted by directory.

    Raises:
        SkillError: a malformed skill, or two skills with one name.
    """
    skills: list[Skill] = []
    seen: dict[str, str] = {}
    for info in await backend.glob(f"*/{SKILL_FILE}", base_dir):
        path = posixpath.join(base_dir, info.path)
        skill = parse_skill(await backend.read(path), path)
        if skill.name in seen:
            raise SkillError(f"skills {seen[skill.name]} and {path} are both named '{skill.name}'", skill=skill.name)
        seen[skill.name] = path
        skills.append(skill)
    return skills


def _listing(skills: list[Skill]) -> str:
    items = "".join(
        f"\n<skill>\n<name>\n{s.name}\n</name>\n<description>\n{s.description}\n</description>\n</skill>"
        for s in skills
    )
    return f"\n<available_skills>{items}\n</available_skills>\n"


def _skill_tool(owner: SkillMiddleware, skills: list[Skill]) -> SchemaTool:
    """The ``skill`` tool over ``skills``: loads one (inline) or runs its agent (fork modes)."""
    by_name = {s.name: s for s in skills}

    async def run(args: dict[str, Any]) -> str:
        wanted = args.get("skill")  # a str or None: the argument's type is checked
        skill = by_name.get(wanted or "")
        if skill is None:
            raise SkillError(f"failed to get skill: skill not found: {wanted}", skill=str(wanted))
        text = prompts.TOOL_RESULT.format(name=skill.name) + prompts.USER_CONTENT.format(
            base=skill.base_directory, content=skill.content
        )
        if skill.context == "inline":
            if skill.model:
                owner.activate(skill)
            return text
        return await owner.fork(skill, text)

    parameters = {
        "type": "object",
        "properties": {"skill": {"type": "string", "description": prompts.SKILL_PARAMETER_DESCRIPTION}},
        "required": ["skill"],
    }
    description = prompts.TOOL_DESCRIPTION_BASE + _listing(skills)
    info = ToolInfo(name=owner.tool_name, description=description, parameters=parameters)
    return SchemaTool(info, run, not_json="failed to unmarshal arguments")


class SkillMiddleware(AgentMiddleware):
    """Loads skills from ``source`` (see the module docstring).

    Args:
        source: a directory on disk (read through a ``LocalBackend``) or a ``Backend``.
        base_dir: the skills directory in the backend (default ``/``).
        agents: for fork modes: agent name -> an agent, or a factory ``(model or None) -> agent``; the key
            ``""`` serves skills that name no agent.
        models: model name -> chat model: handed to a fork's agent factory; an inline skill's model answers the
            run's later calls.
        tool_name: the tool's name (default ``skill``).

    Raises:
        SkillError: ``source`` is a path that is not an existing directory.
    """

    def __init__(
        self,
        source: Backend | str | os.PathLike[str],
        *,
        base_dir: str = "/",
        agents: Mapping[str, Agent | AgentFactory] | None = None,
        models: Mapping[str, ChatModel] | None = None,
        tool_name: str = "skill",
    ) -> None:
        self.backend: Backend = _skills_directory(source) if isinstance(source, str | os.PathLike) else source
        self.base_dir = base_dir
        self.agents = dict(agents or {})
        self.models = dict(models or {})
        self.tool_name = tool_name
        self.instruction = prompts.SYSTEM_PROMPT.format(tool_name=tool_name)
        self._active: OrderedDict[int, tuple[ReactContext, ChatModel]] = OrderedDict()

    def __repr__(self) -> str:
        return f"SkillMiddleware({self.backend!r}, base_dir={self.base_dir!r})"

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        tool = _skill_tool(self, await load_skills(self.backend, self.base_dir))
        return ChatModelAgentContext(
            context.instruction + "\n" + self.instruction, [*context.tools, tool], set(context.return_directly)
        )

    def _model(self, skill: Skill) -> ChatModel:
        model = self.models.get(skill.model)
        if model is None:
            raise SkillError(
                f"skill '{skill.name}' requires model '{skill.model}' but it is not among the models "
                f"{sorted(self.models)}",
                skill=skill.name,
            )
        return model

    def activate(self, skill: Skill) -> None:
        """An inline skill with a model: the current run's later model calls go to it."""
        model = self._model(skill)
        run = current_react.get()
        if run is not None:
            self._active[id(run)] = (run, model)
            while len(self._active) > 64:
                self._active.popitem(last=False)

    def active_model(self) -> ChatModel | None:
        """The model an inline skill chose for the current run, if any."""
        run = current_react.get()
        hit = self._active.get(id(run)) if run is not None else None
        return hit[1] if hit is not None and hit[0] is run else None

    def wrap_model(self, model: ChatModel) -> ChatModel:
        return _SkillModel(model, self) if self.models else model

    def _agent(self, skill: Skill) -> Agent:
        entry = self.agents.get(skill.agent)
        if entry is None:
            raise SkillError(
                f"skill '{skill.name}' requires context:{skill.context} but no agent '{skill.agent}' is configured "
                f"(agents: {sorted(self.agents)})",
                skill=skill.name,
            )
        model = self._model(skill) if skill.model else None
        if callable(getattr(entry, "run", None)) and getattr(entry, "name", None):
            return entry  # type: ignore[return-value]
        assert callable(entry)
        return entry(model)

    async def fork(self, skill: Skill, text: str) -> str:
        """Run the skill's agent (fork modes) and return Eino's result text."""
        from adk.runner import AgentRun

        agent = self._agent(skill)
        parent = current_react.get()
        if skill.context == "fork_with_context":
            history = list(parent.state.messages) if parent is not None and parent.state is not None else []
            messages: list[Message] = [*history, tool_message(text, get_tool_call_id() or "")]
        else:
            messages = [user_message(text)]
        outer = parent.session if parent is not None else None
        session = RunSession(values=outer.values if outer is not None else {})
        session.root_input = list(messages)
        results: list[str] = []
        async with AgentRun(agent, session, input=AgentInput(messages, False)) as run:
            async for event in run:
                if event.error is not None:
                    raise SkillError(
                        f"skill '{skill.name}': failed to run agent event: {event.error}", skill=skill.name
                    ) from event.error
                if event.message is None:
                    continue
                content = (await event.message.get_message()).content
                if content:
                    results.append(content)
        return prompts.SUB_AGENT_RESULT.format(name=skill.name, result="\n".join(results))


def _skills_directory(source: str | os.PathLike[str]) -> LocalBackend:
    """A ``LocalBackend`` on the existing directory ``source`` (a typo must not create an empty one)."""
    try:
        return LocalBackend(source, create=False)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise SkillError(f"skills directory {os.fspath(source)!r}: {exc}", path=os.fspath(source)) from None


class _SkillModel(ModelWrapper):
    """Calls the model an inline skill chose for the run (with the run's tools), else the wrapped one."""

    def __init__(self, inner: ChatModel, owner: SkillMiddleware) -> None:
        super().__init__(inner)
        self.owner = owner
        self._bound: dict[tuple[int, int], tuple[ChatModel, list[ToolInfo], ChatModel]] = {}

    def _target(self) -> ChatModel:
        chosen = self.owner.active_model()
        if chosen is None:
            return self.inner
        run = current_react.get()
        infos = run.state.tool_infos if run is not None and run.state is not None else None
        if not infos:
            return chosen
        key = (id(chosen), id(infos))
        hit = self._bound.get(key)
        if hit is None or hit[0] is not chosen or hit[1] is not infos:
            hit = (chosen, infos, chosen.with_tools(infos))
            if len(self._bound) > 32:
                self._bound.clear()  # one entry per run's tool list: keep a few
            self._bound[key] = hit
        return hit[2]

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self._target().generate(messages, **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self._target().stream(messages, **opts)
