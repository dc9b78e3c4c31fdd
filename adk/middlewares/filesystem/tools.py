"""The filesystem tools over a :class:`~adk.middlewares.filesystem.Backend` (Eino's ``filesystem.go``): names,
JSON argument names, descriptions and output texts as in Eino.

A tool whose backend raises fails its call (as in Eino, where the tool returns the error); wrap the agent's tools
with ``compose.tool_errors_as_results`` to hand such errors to the model as results instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from adk.middlewares.filesystem import _prompts as prompts
from adk.middlewares.filesystem._vfs import GrepMatch, sort_by_base_name
from adk.middlewares.filesystem.backend import Backend
from compose.schema import ToolInfo
from compose.tools.arguments import Run, SchemaTool

__all__ = [
    "NO_FILES_FOUND",
    "NO_MATCHES_FOUND",
    "TOOL_NAMES",
    "ExecuteResponse",
    "FilesystemTool",
    "Shell",
    "execute_tool",
    "filesystem_tools",
    "format_line_numbers",
]

NO_FILES_FOUND = "No files found"
NO_MATCHES_FOUND = "No matches found"
TOOL_NAMES = ("ls", "read_file", "write_file", "edit_file", "glob", "grep")
"""The backend tools, in Eino's order (``execute`` comes with a shell)."""


@dataclass(frozen=True, slots=True)
class ExecuteResponse:
    """What a shell command gave (Eino's ``ExecuteResponse``): its combined output, exit code (None: unknown,
    e.g. killed) and whether the output was cut."""

    output: str
    exit_code: int | None = 0
    truncated: bool = False


class Shell(Protocol):
    """Runs the ``execute`` tool's commands (Eino's ``Shell``)."""

    async def execute(self, command: str) -> ExecuteResponse:
        """Run ``command`` and return its output."""
        ...


class FilesystemTool(SchemaTool):
    """One filesystem tool, a :class:`~compose.tools.SchemaTool`. ``needed`` names the arguments a call must give
    (not null): Eino's schemas mark more as required than a call needs (``offset``, ``replace_all``), and a missing
    ``content`` must not empty a file."""

    def __init__(
        self, name: str, description: str, parameters: dict[str, Any], fn: Run, needed: Sequence[str] = ()
    ) -> None:
        info = ToolInfo(name=name, description=description, parameters=parameters)
        super().__init__(info, fn, required=needed, not_json="not JSON")


def _schema(props: dict[str, dict[str, Any]], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


def _s(description: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {}), **extra}


def _i(description: str) -> dict[str, Any]:
    return {"type": "integer", "description": description}


def _b(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "boolean", "description": description, **extra}


def format_line_numbers(content: str, start: int) -> str:
    """``cat -n`` style: each line prefixed with its number (6 wide) and a tab, from ``start`` (Eino's
    ``formatLineNumbers``)."""
    return "\n".join(f"{start + i:6d}\t{line}" for i, line in enumerate(content.split("\n")))


def _paginate(items: list[Any], offset: int, head_limit: int) -> list[Any]:
    items = items[max(offset, 0) :]
    return items[:head_limit] if 0 < head_limit < len(items) else items


def _files_output(matches: Sequence[GrepMatch], offset: int, head_limit: int) -> str:
    if not matches:
        return NO_FILES_FOUND
    paths = list(dict.fromkeys(m.path for m in matches))
    total = len(paths)
    shown = _paginate(paths, offset, head_limit)
    return f"Found {total} {'file' if total == 1 else 'files'}\n" + "\n".join(shown)


def _content_output(matches: Sequence[GrepMatch], line_numbers: bool) -> str:
    if not matches:
        return NO_MATCHES_FOUND
    return "\n".join(f"{m.path}:{m.line}:{m.content}" if line_numbers else f"{m.path}:{m.content}" for m in matches)


def _count_output(matches: Sequence[GrepMatch], offset: int, head_limit: int) -> str:
    counts: dict[str, int] = {}
    for m in matches:
        counts[m.path] = counts.get(m.path, 0) + 1
    total, files = len(matches), len(counts)
    summary = (
        f"Found {total} total {'occurrence' if total == 1 else 'occurrences'} across {files} "
        f"{'file' if files == 1 else 'files'}."
    )
    if total == 0:
        return f"{NO_MATCHES_FOUND}\n\n{summary}"
    lines = [f"{p}:{counts[p]}" for p in _paginate(sorted(counts), offset, head_limit)]
    return "\n".join(lines) + "\n\n" + summary


def filesystem_tools(
    backend: Backend, *, descriptions: Mapping[str, str] | None = None, disabled: Sequence[str] = ()
) -> list[FilesystemTool]:
    """Eino's ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob`` and ``grep`` tools on ``backend``.

    Args:
        backend: the files.
        descriptions: tool name -> a description replacing Eino's.
        disabled: names of tools to leave out.
    """
    desc = {
        "ls": prompts.LS_TOOL_DESCRIPTION,
        "read_file": prompts.READ_FILE_TOOL_DESCRIPTION,
        "write_file": prompts.WRITE_FILE_TOOL_DESCRIPTION,
        "edit_file": prompts.EDIT_FILE_TOOL_DESCRIPTION,
        "glob": prompts.GLOB_TOOL_DESCRIPTION,
        "grep": prompts.GREP_TOOL_DESCRIPTION,
        **(descriptions or {}),
    }

    async def ls(args: dict[str, Any]) -> str:
        infos = await backend.ls(args.get("path") or "/")
        return "\n".join(i.path for i in infos) if infos else NO_FILES_FOUND

    async def read_file(args: dict[str, Any]) -> str:
        path = args.get("file_path") or ""
        offset = max(args.get("offset") or 1, 1)  # the types are checked: an int or None
        limit = max(args.get("limit") or 0, 0) or 2000
        content = await backend.read(path, offset=offset, limit=limit)
        return format_line_numbers(content, offset)

    async def write_file(args: dict[str, Any]) -> str:
        path = args["file_path"]
        await backend.write(path, args["content"])
        return f"Updated file {path}"

    async def edit_file(args: dict[str, Any]) -> str:
        path = args["file_path"]
        await backend.edit(path, args["old_string"], args["new_string"], replace_all=bool(args.get("replace_all")))
        return f"Successfully replaced the string in '{path}'"

    async def glob(args: dict[str, Any]) -> str:
        infos = await backend.glob(args.get("pattern") or "", args.get("path") or "/")
        return "\n".join(i.path for i in infos) if infos else NO_FILES_FOUND

    async def grep(args: dict[str, Any]) -> str:
        context = args.get("-C")
        if isinstance(context, int):
            before = after = context
        else:
            before, after = args.get("-B") or 0, args.get("-A") or 0
        matches = await backend.grep(
            args.get("pattern") or "",
            path=args.get("path") or "",
            glob=args.get("glob") or "",
            file_type=args.get("type") or "",
            case_insensitive=bool(args.get("-i")),
            multiline=bool(args.get("multiline")),
            before_lines=before,
            after_lines=after,
        )
        matches = sort_by_base_name(matches)
        offset, head_limit = args.get("offset") or 0, args.get("head_limit") or 0
        mode = args.get("output_mode")
        if mode == "content":
            numbers = args.get("-n")
            return _content_output(_paginate(matches, offset, head_limit), numbers is None or bool(numbers))
        if mode == "count":
            return _count_output(matches, offset, head_limit)
        return _files_output(matches, offset, head_limit)

    ctx_note = "Requires output_mode: 'content', ignored otherwise."
    specs: list[tuple[str, dict[str, Any], Run, tuple[str, ...]]] = [
        ("ls", _schema({"path": _s()}, ["path"]), ls, ()),
        (
            "read_file",
            _schema(
                {
                    "file_path": _s("The path to the file to read"),
                    "offset": _i(
                        "The line number to start reading from. Only provide if the file is too large to read at once"
                    ),
                    "limit": _i("The number of lines to read. Only provide if the file is too large to read at once."),
                },
                ["file_path", "offset", "limit"],
            ),
            read_file,
            ("file_path",),
        ),
        (
            "write_file",
            _schema(
                {"file_path": _s("The path to the file to write"), "content": _s("The content to write to the file")},
                ["file_path", "content"],
            ),
            write_file,
            ("file_path", "content"),
        ),
        (
            "edit_file",
            _schema(
                {
                    "file_path": _s("The path to the file to modify"),
                    "old_string": _s("The text to replace"),
                    "new_string": _s("The text to replace it with (must be different from old_string)"),
                    "replace_all": _b("Replace all occurrences of old_string (default false)", default=False),
                },
                ["file_path", "old_string", "new_string", "replace_all"],
            ),
            edit_file,
            ("file_path", "old_string", "new_string"),
        ),
        (
            "glob",
            _schema(
                {
                    "pattern": _s("The glob pattern to match files against"),
                    "path": _s(
                        "The directory to search in. If not specified, the current working directory will be used. "
                        "IMPORTANT: Omit this field to use the default directory. DO NOT enter 'undefined' or "
                        "'null' - simply omit it for the default behavior. Must be a valid directory path if "
                        "provided."
                    ),
                },
                ["pattern", "path"],
            ),
            glob,
            ("pattern",),
        ),
        (
            "grep",
            _schema(
                {
                    "pattern": _s("The regular expression pattern to search for in file contents"),
                    "path": _s("File or directory to search in (rg PATH). Defaults to current working directory."),
                    "glob": _s("Glob pattern to filter files (e.g. '*.js', '*.{ts,tsx}') - maps to rg --glob"),
                    "output_mode": _s(
                        "Output mode: 'content' shows matching lines (supports -A/-B/-C context, -n line numbers, "
                        "head_limit), 'files_with_matches' shows file paths (supports head_limit), 'count' shows "
                        "match counts (supports head_limit). Defaults to 'files_with_matches'.",
                        enum=["content", "files_with_matches", "count"],
                    ),
                    "-C": _i(f"Number of lines to show before and after each match (rg -C). {ctx_note}"),
                    "-B": _i(f"Number of lines to show before each match (rg -B). {ctx_note}"),
                    "-A": _i(f"Number of lines to show after each match (rg -A). {ctx_note}"),
                    "-n": _b(f"Show line numbers in output (rg -n). {ctx_note} Defaults to true."),
                    "-i": _b("Case insensitive search (rg -i)"),
                    "type": _s(
                        "File type to search (rg --type). Common types: js, py, rust, go, java, etc. More "
                        "efficient than include for standard file types."
                    ),
                    "head_limit": _i(
                        "Limit output to first N lines/entries, equivalent to '| head -N'. Works across all "
                        "output modes: content (limits output lines), files_with_matches (limits file paths), "
                        "count (limits count entries). Defaults to 0 (unlimited)."
                    ),
                    "offset": _i(
                        "Skip first N lines/entries before applying head_limit, equivalent to '| tail -n +N | "
                        "head -N'. Works across all output modes. Defaults to 0."
                    ),
                    "multiline": _b(
                        "Enable multiline mode where . matches newlines and patterns can span lines (rg -U "
                        "--multiline-dotall). Default: false."
                    ),
                },
                ["pattern"],
            ),
            grep,
            ("pattern",),
        ),
    ]
    return [
        FilesystemTool(name, desc[name], params, fn, needed)
        for name, params, fn, needed in specs
        if name not in disabled
    ]


def convert_execute_response(response: ExecuteResponse) -> str:
    """The ``execute`` tool's text for a response (Eino's ``convExecuteResponse``)."""
    parts = [response.output]
    failed = response.exit_code is not None and response.exit_code != 0
    if failed:
        parts.append(f"[Command failed with exit code {response.exit_code}]")
    if response.truncated:
        parts.append("[Output was truncated due to size limits]")
    result = "\n".join(parts)
    if not result and not failed:
        return "[Command executed successfully with no output]"
    return result


def execute_tool(shell: Shell, *, description: str | None = None) -> FilesystemTool:
    """Eino's ``execute`` tool (argument ``command``) on ``shell``."""

    async def execute(args: dict[str, Any]) -> str:
        return convert_execute_response(await shell.execute(args.get("command") or ""))

    params = _schema({"command": _s()}, ["command"])
    return FilesystemTool("execute", description or prompts.EXECUTE_TOOL_DESCRIPTION, params, execute, ("command",))
