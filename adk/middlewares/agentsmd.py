"""AGENTS.md (Eino's ``adk/middlewares/agentsmd``): project instructions from files, given to the model with every
call.

``AgentsMDMiddleware(["/repo/AGENTS.md"])`` reads the files (and the files they import with ``@path``: relative
to the importing file, ``.md``/``.txt``/``.mdx``/``.yaml``/``.yml``/``.json``/``.toml`` or any path with a
``/``, at most 5 deep, each file once, a cycle skipped), and puts one user message with Eino's
``<system-reminder>`` text before the first user message of each model request. Missing files are skipped with
a warning (``on_warning``, default: the ``adk.middlewares.agentsmd`` logger); with ``max_bytes`` the files after
the budget is spent are skipped.

Stricter than Eino (which writes the message into the run's state, so it reaches the history and checkpoints and
depends on the middleware order): the message is added at model-call time only (``wrap_model``), so it is never
stored in the history, a checkpoint or a session, and summarization never sees it whatever the order. The files
are read once per run.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from adk._run import RunContext, current_run
from adk.errors import BackendFileNotFoundError
from adk.middlewares.base import AgentMiddleware, ModelWrapper
from adk.middlewares.filesystem import Backend, LocalBackend
from compose.models.base import ChatModel
from compose.schema import Message, user_message
from compose.stream import StreamReader

__all__ = ["AGENTS_MD_EXTRA_KEY", "AgentsMDMiddleware", "format_agents_md"]

AGENTS_MD_EXTRA_KEY = "__agentsmd_content__"
_IMPORT = re.compile(r"@([a-zA-Z0-9_.~/][a-zA-Z0-9_.~/\-]*)")
_IMPORT_EXTS = {".md", ".txt", ".mdx", ".yaml", ".yml", ".json", ".toml"}
_MAX_DEPTH = 5
_HEADER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\nCodebase and user "
    "instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE "
    "any default behavior and you MUST follow them exactly as written.\n"
)
_FOOTER = (
    "IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this context "
    "unless it is highly relevant to your task.\n</system-reminder>"
)
_log = logging.getLogger("adk.middlewares.agentsmd")


def format_agents_md(files: Sequence[tuple[str, str]]) -> str:
    """Eino's reminder text for ``(path, content)`` files (empty for none)."""
    if not files:
        return ""
    body = "".join(f"\nContents of {path} (instructions):\n\n{content}\n" for path, content in files)
    return _HEADER + body + _FOOTER


class _Loader:
    def __init__(self, backend: Backend, max_bytes: int, warn: Callable[[str, str], None]) -> None:
        self.backend = backend
        self.max_bytes = max_bytes
        self.warn = warn
        self.total = 0

    def _over(self) -> bool:
        return self.max_bytes > 0 and self.total > self.max_bytes

    async def load(self, files: Sequence[str]) -> str:
        parts: list[tuple[str, str]] = []
        seen: set[str] = set()
        for i, path in enumerate(files):
            loaded = await self.file(path, 0, set(), seen)
            if i > 0 and self._over():
                self.warn(path, f"skipped: cumulative size {self.total} exceeds max bytes {self.max_bytes}")
                break
            parts.extend(loaded)
        return format_agents_md(parts)

    async def file(self, path: str, depth: int, visiting: set[str], seen: set[str]) -> list[tuple[str, str]]:
        path = posixpath.normpath(path)
        if depth > _MAX_DEPTH:
            self.warn(path, f"@import depth exceeds maximum of {_MAX_DEPTH}")
            return []
        if path in visiting:
            self.warn(path, "circular @import detected")
            return []
        if path in seen:
            return []
        visiting.add(path)
        try:
            try:
                content = await self.backend.read(path)
            except BackendFileNotFoundError:
                self.warn(path, "file not found, skipping")
                return []
            self.total += len(content.encode("utf-8", "surrogatepass"))
            seen.add(path)
            if not content:
                return []
            out = [(path, content)]
            for raw in _IMPORT.findall(content):
                if "/" not in raw and posixpath.splitext(raw)[1] not in _IMPORT_EXTS:
                    continue
                if self._over():
                    break
                target = raw if raw.startswith("/") else posixpath.join(posixpath.dirname(path), raw)
                if target in seen:
                    continue
                out.extend(await self.file(target, depth + 1, visiting, seen))
            return out
        finally:
            visiting.discard(path)


def _with_reminder(messages: Sequence[Message], content: str) -> list[Message]:
    if not content or any(AGENTS_MD_EXTRA_KEY in m.extra for m in messages):
        return list(messages)
    note = user_message(content).model_copy(update={"extra": {AGENTS_MD_EXTRA_KEY: True}})
    at = next((i for i, m in enumerate(messages) if m.role == "user"), len(messages))
    return [*messages[:at], note, *messages[at:]]


class AgentsMDMiddleware(AgentMiddleware):
    """Gives the model the AGENTS.md files with every call (see the module docstring).

    Args:
        files: the files, in order (virtual paths of ``backend``; host paths without one).
        backend: where to read them (default: the host's file system, read-only use).
        max_bytes: the budget of all files (0: none).
        on_warning: ``(path, problem)`` for a skipped file or import.

    Raises:
        ValueError: no files, or a negative budget.
    """

    def __init__(
        self,
        files: Sequence[str] = ("AGENTS.md",),
        *,
        backend: Backend | None = None,
        max_bytes: int = 0,
        on_warning: Callable[[str, str], None] | None = None,
    ) -> None:
        if isinstance(files, str):
            files = [files]
        if not files:
            raise ValueError("[agentsmd]: at least one agent file path is required")
        if max_bytes < 0:
            raise ValueError("[agentsmd]: max_bytes must be non-negative")
        self.files = list(files)
        self.backend: Backend = backend if backend is not None else LocalBackend("/")
        self.max_bytes = max_bytes
        self.on_warning = on_warning or (
            lambda path, problem: _log.warning("[agentsmd] warning: %s: %s", path, problem)
        )
        self._cache: OrderedDict[int, tuple[RunContext, str]] = OrderedDict()

    def __repr__(self) -> str:
        return f"AgentsMDMiddleware({self.files})"

    async def content(self) -> str:
        """The reminder text, read once per run (re-read outside a run)."""
        run = current_run.get()
        if run is not None:
            hit = self._cache.get(id(run))
            if hit is not None and hit[0] is run:
                return hit[1]
        text = await _Loader(self.backend, self.max_bytes, self.on_warning).load(self.files)
        if run is not None:
            self._cache[id(run)] = (run, text)
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return text

    def wrap_model(self, model: ChatModel) -> ChatModel:
        return _Injecting(model, self)


class _Injecting(ModelWrapper):
    def __init__(self, inner: ChatModel, owner: AgentsMDMiddleware) -> None:
        super().__init__(inner)
        self.owner = owner

    async def generate(self, messages: Sequence[Message], **opts: Any) -> Message:
        return await self.inner.generate(_with_reminder(messages, await self.owner.content()), **opts)

    async def stream(self, messages: Sequence[Message], **opts: Any) -> StreamReader[Message]:
        return await self.inner.stream(_with_reminder(messages, await self.owner.content()), **opts)
