"""``FilesystemMiddleware`` (Eino's ``filesystem.New``): the filesystem tools, the ``execute`` tool with a shell,
and opt-in offloading of large tool results to the backend.

Offloading is off by default, as in Eino's current ``New`` (its deprecated ``NewMiddleware`` did it by default):
with ``large_result_tokens=N``, a tool result longer than ``4 * N`` bytes (Eino's estimate) is written to
``/large_tool_result/{call_id}`` in the backend (or where ``large_result_path`` says) and the model gets Eino's
pointer text with the result's first 10 lines instead. A streamed result is read whole first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from adk.middlewares.base import AgentMiddleware, ChatModelAgentContext
from adk.middlewares.filesystem._prompts import TOO_LARGE_TOOL_MESSAGE
from adk.middlewares.filesystem.backend import Backend
from adk.middlewares.filesystem.tools import Shell, execute_tool, filesystem_tools
from compose.stream import StreamReader
from compose.tools.base import BaseTool
from compose.tools.middleware import (
    InvokableToolEndpoint,
    StreamableToolEndpoint,
    StreamToolOutput,
    ToolInput,
    ToolOutput,
)

__all__ = ["FilesystemMiddleware", "large_result_pointer"]


def large_result_pointer(result: str, call_id: str, path: str) -> str:
    """Eino's text replacing an offloaded result: where it is, and its first 10 lines (each cut at 1000
    characters)."""
    lines = result.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sample = "".join(f"{n}: {line.removesuffix(chr(13))[:1000]}\n" for n, line in enumerate(lines[:10], 1))
    return TOO_LARGE_TOOL_MESSAGE.format(tool_call_id=call_id, file_path=path, content_sample=sample)


class FilesystemMiddleware(AgentMiddleware):
    """Adds Eino's filesystem tools (``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``) on
    ``backend`` and, with ``shell``, the ``execute`` tool.

    Args:
        backend: the files (``InMemoryBackend()``, ``LocalBackend(root)`` or any ``Backend``); may be None
            when only ``shell`` is given.
        shell: runs the ``execute`` tool's commands (``LocalShell(root)``: opt-in, no sandbox).
        large_result_tokens: offload tool results over this many tokens (4 bytes a token) to the backend
            (None: never, the default).
        large_result_path: ``(ToolInput) -> path`` of an offloaded result (default ``/large_tool_result/{call_id}``).
        system_prompt: text added to the instruction (after a newline; none by default, as in Eino).
        tool_descriptions: tool name -> a description replacing Eino's.
        disabled_tools: names of backend tools to leave out.

    Raises:
        ValueError: neither a backend nor a shell, or offloading without a backend.

    Example::

        agent = ChatModelAgent(..., middlewares=[FilesystemMiddleware(LocalBackend("/tmp/work"))])
    """

    def __init__(
        self,
        backend: Backend | None = None,
        *,
        shell: Shell | None = None,
        large_result_tokens: int | None = None,
        large_result_path: Callable[[ToolInput], str] | None = None,
        system_prompt: str | None = None,
        tool_descriptions: Mapping[str, str] | None = None,
        disabled_tools: Sequence[str] = (),
    ) -> None:
        if backend is None and shell is None:
            raise ValueError("FilesystemMiddleware needs a backend or a shell")
        if large_result_tokens is not None and (backend is None or large_result_tokens < 1):
            raise ValueError("large_result_tokens needs a backend and a positive token count")
        self.backend = backend
        self.shell = shell
        self.large_result_tokens = large_result_tokens
        self.large_result_path = large_result_path or (lambda inp: f"/large_tool_result/{inp.call_id}")
        self.system_prompt = system_prompt or ""
        descriptions = dict(tool_descriptions or {})
        tools: list[BaseTool] = []
        if backend is not None:
            tools.extend(filesystem_tools(backend, descriptions=descriptions, disabled=disabled_tools))
        if shell is not None:
            tools.append(execute_tool(shell, description=descriptions.get("execute")))
        self.tools = tools

    def __repr__(self) -> str:
        names = [t.info().name for t in self.tools]
        return f"FilesystemMiddleware(tools={names}, large_result_tokens={self.large_result_tokens})"

    async def before_agent(self, context: ChatModelAgentContext) -> ChatModelAgentContext:
        instruction = context.instruction + "\n" + self.system_prompt if self.system_prompt else context.instruction
        return ChatModelAgentContext(instruction, [*context.tools, *self.tools], set(context.return_directly))

    async def _offload(self, result: str, inp: ToolInput) -> str:
        assert self.large_result_tokens is not None and self.backend is not None
        if len(result.encode("utf-8", "surrogatepass")) <= self.large_result_tokens * 4:
            return result
        path = self.large_result_path(inp)
        await self.backend.write(path, result)
        return large_result_pointer(result, inp.call_id, path)

    def wrap_invokable_tool_call(self, next: InvokableToolEndpoint) -> InvokableToolEndpoint:
        if self.large_result_tokens is None:
            return next

        async def endpoint(inp: ToolInput) -> ToolOutput:
            out = await next(inp)
            return ToolOutput(await self._offload(out.result, inp))

        return endpoint

    def wrap_streamable_tool_call(self, next: StreamableToolEndpoint) -> StreamableToolEndpoint:
        if self.large_result_tokens is None:
            return next

        async def endpoint(inp: ToolInput) -> StreamToolOutput:
            out = await next(inp)
            parts: list[str] = []
            async with out.result as reader:
                async for chunk in reader:
                    parts.append(chunk)
            return StreamToolOutput(StreamReader.from_iterable([await self._offload("".join(parts), inp)]))

        return endpoint
