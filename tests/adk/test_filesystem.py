"""The filesystem backends and tools (Eino's ``adk/filesystem/backend_inmemory_test.go`` and
``adk/middlewares/filesystem/filesystem_test.go``, ported), each run on both InMemoryBackend and LocalBackend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adk.errors import BackendFileNotFoundError, EditError, FilesystemError, GrepPatternError
from adk.middlewares import (
    Backend,
    ExecuteResponse,
    FilesystemMiddleware,
    InMemoryBackend,
    LocalBackend,
)
from adk.middlewares.base import ChatModelAgentContext
from adk.middlewares.filesystem import filesystem_tools, large_result_pointer
from adk.middlewares.filesystem._prompts import LS_TOOL_DESCRIPTION
from adk.middlewares.filesystem.tools import execute_tool
from compose.errors import ToolArgumentsError
from compose.stream import StreamReader
from compose.tools.middleware import StreamToolOutput, ToolInput, ToolOutput

pytestmark = pytest.mark.anyio

SETUP = {
    "/file1.txt": "line1\nline2\nline3\nline4\nline5",
    "/file2.go": 'package main\n\nfunc main() {\n\tprintln("hello")\n}',
    "/dir1/file3.txt": "hello world\nfoo bar\nhello again",
    "/dir1/file4.py": "print('hello')\nprint('world')",
    "/dir2/file5.go": "package test\n\nfunc test() {}",
}


@pytest.fixture(params=["memory", "local"])
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def make() -> Backend:
        return InMemoryBackend() if request.param == "memory" else LocalBackend(tmp_path / "root")

    return make


async def seeded(make_backend: Any, files: dict[str, str] = SETUP) -> Backend:
    backend: Backend = make_backend()
    for path, content in files.items():
        await backend.write(path, content)
    return backend


async def run_tool(backend: Backend, name: str, args: dict[str, Any]) -> str:
    tools = {t.info().name: t for t in filesystem_tools(backend)}
    return await tools[name].run(json.dumps(args))


async def test_ls_lists_names_of_files_and_directories(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    assert await run_tool(backend, "ls", {"path": "/"}) == "dir1\ndir2\nfile1.txt\nfile2.go"
    assert await run_tool(backend, "ls", {"path": ""}) == "dir1\ndir2\nfile1.txt\nfile2.go"
    assert await run_tool(backend, "ls", {"path": "/dir1"}) == "file3.txt\nfile4.py"
    assert await run_tool(backend, "ls", {"path": "/dir1/file3.txt"}) == "file3.txt"
    assert await run_tool(backend, "ls", {"path": "/nowhere"}) == "No files found"
    infos = await backend.ls("/")
    assert [(i.path, i.is_dir) for i in infos] == [
        ("dir1", True),
        ("dir2", True),
        ("file1.txt", False),
        ("file2.go", False),
    ]
    assert infos[2].size == len("line1\nline2\nline3\nline4\nline5") and infos[2].modified_at


async def test_read_file_numbers_lines_like_cat_n(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    whole = "     1\tline1\n     2\tline2\n     3\tline3\n     4\tline4\n     5\tline5"
    assert await run_tool(backend, "read_file", {"file_path": "/file1.txt", "offset": 0, "limit": 100}) == whole
    assert await run_tool(backend, "read_file", {"file_path": "/file1.txt", "offset": 2, "limit": 2}) == (
        "     2\tline2\n     3\tline3"
    )
    assert await run_tool(backend, "read_file", {"file_path": "/file1.txt", "offset": 0, "limit": 0}) == whole
    assert await run_tool(backend, "read_file", {"file_path": "/file1.txt", "offset": -1, "limit": 2}) == (
        "     1\tline1\n     2\tline2"
    )
    assert await run_tool(backend, "read_file", {"file_path": "/file1.txt"}) == whole
    with pytest.raises(BackendFileNotFoundError, match="file not found: /nonexistent\\.txt"):
        await run_tool(backend, "read_file", {"file_path": "/nonexistent.txt", "offset": 0, "limit": 10})


async def test_read_file_defaults_to_2000_lines(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/big.txt": "\n".join(f"line{i}" for i in range(1, 2501))})
    assert len((await run_tool(backend, "read_file", {"file_path": "/big.txt", "limit": 0})).split("\n")) == 2000
    assert len((await run_tool(backend, "read_file", {"file_path": "/big.txt", "limit": 10})).split("\n")) == 10
    assert len((await backend.read("/big.txt")).split("\n")) == 2500


async def test_backend_read_edge_cases(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/test.txt": "line1\nline2\nline3"})
    assert await backend.read("/test.txt", offset=-5, limit=2) == "line1\nline2"
    assert await backend.read("/test.txt", offset=100, limit=10) == ""
    assert await backend.read("/test.txt", offset=0, limit=0) == "line1\nline2\nline3"
    assert await backend.read("/test.txt", offset=1, limit=100) == "line1\nline2\nline3"
    assert await backend.read("/test.txt", offset=2) == "line2\nline3"


async def test_write_file_creates_and_overwrites(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    assert await run_tool(backend, "write_file", {"file_path": "/newfile.txt", "content": "new content"}) == (
        "Updated file /newfile.txt"
    )
    assert await run_tool(backend, "write_file", {"file_path": "/file1.txt", "content": "overwritten"}) == (
        "Updated file /file1.txt"
    )
    assert await backend.read("/newfile.txt", limit=100) == "new content"
    assert await backend.read("/file1.txt") == "overwritten"


async def test_paths_are_normalized(make_backend: Any) -> None:
    backend: Backend = make_backend()
    for given, normalized in [
        ("test.txt", "/test.txt"),
        ("//test2.txt", "/test2.txt"),
        ("/dir//file.txt", "/dir/file.txt"),
        ("/dir/../file3.txt", "/file3.txt"),
    ]:
        await backend.write(given, "content")
        assert await backend.read(normalized, limit=10) == "content"


async def test_edit_file_replaces_once_or_everywhere(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    await backend.write("/edit1.txt", "hello world\nhello again\nhello world")
    args = {"file_path": "/edit1.txt", "old_string": "hello again", "new_string": "hi", "replace_all": False}
    assert await run_tool(backend, "edit_file", args) == "Successfully replaced the string in '/edit1.txt'"
    assert await backend.read("/edit1.txt") == "hello world\nhi\nhello world"
    await backend.write("/edit2.txt", "hello world\nhello again\nhello world")
    args = {"file_path": "/edit2.txt", "old_string": "hello", "new_string": "hi", "replace_all": True}
    await run_tool(backend, "edit_file", args)
    assert await backend.read("/edit2.txt") == "hi world\nhi again\nhi world"


async def test_edit_errors_say_what_is_wrong(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/test.txt": "foo bar foo baz"})
    with pytest.raises(BackendFileNotFoundError, match="not found"):
        await backend.edit("/nonexistent.txt", "old", "new")
    with pytest.raises(EditError, match="non-empty"):
        await backend.edit("/test.txt", "", "new")
    with pytest.raises(EditError, match=r"oldString not found in file: /test\.txt"):
        await backend.edit("/test.txt", "notfound", "new")
    with pytest.raises(EditError, match=r"multiple occurrences of oldString found in file /test\.txt"):
        await backend.edit("/test.txt", "foo", "FOO")
    await backend.edit("/test.txt", "bar", "BAR")
    await backend.edit("/test.txt", "foo", "FOO", replace_all=True)
    assert await backend.read("/test.txt") == "FOO BAR FOO baz"


async def test_glob_matches_relative_or_absolute_patterns(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    cases = [
        ({"pattern": "*.txt", "path": "/"}, "file1.txt"),
        ({"pattern": "*.go", "path": "/"}, "file2.go"),
        ({"pattern": "*.txt", "path": "/dir1"}, "file3.txt"),
        ({"pattern": "*.py", "path": "/dir1"}, "file4.py"),
        ({"pattern": "*.go", "path": ""}, "file2.go"),
        ({"pattern": "/dir1/*.txt", "path": "/"}, "/dir1/file3.txt"),
        ({"pattern": "**/*.go"}, "dir2/file5.go\nfile2.go"),
        ({"pattern": "*.{py,go}", "path": "/dir1"}, "file4.py"),
        ({"pattern": "dir?/file[34].*"}, "dir1/file3.txt\ndir1/file4.py"),
        ({"pattern": "*.rs"}, "No files found"),
    ]
    for args, expected in cases:
        assert await run_tool(backend, "glob", args) == expected, args


async def test_glob_recursive_from_a_deep_directory(make_backend: Any) -> None:
    files = {
        "/Users/me/github/eino/file1.go": "a",
        "/Users/me/github/openai-go/paginationmanual_test.go": "b",
        "/Users/me/github/openai-go/paginationauto_test.go": "c",
        "/Users/me/other/test.go": "d",
    }
    backend = await seeded(make_backend, files)
    got = [i.path for i in await backend.glob("**/*.go", "/Users/me/github")]
    assert got == ["eino/file1.go", "openai-go/paginationauto_test.go", "openai-go/paginationmanual_test.go"]
    got = [i.path for i in await backend.glob("*.go", "/Users/me/github/openai-go")]
    assert got == ["paginationauto_test.go", "paginationmanual_test.go"]
    got = [i.path for i in await backend.glob("/Users/me/github/**/*.go", "/")]
    assert got == [p for p in sorted(files) if "/github/" in p]
    with pytest.raises(GrepPatternError, match="invalid glob pattern"):
        await backend.glob("[abc", "/")


async def test_grep_output_modes(make_backend: Any) -> None:
    backend = await seeded(make_backend)
    assert await run_tool(backend, "grep", {"pattern": "hello", "output_mode": "count"}) == (
        "/dir1/file3.txt:2\n/dir1/file4.py:1\n/file2.go:1\n\nFound 4 total occurrences across 3 files."
    )
    content = await run_tool(backend, "grep", {"pattern": "hello", "output_mode": "content"})
    for line in ["/dir1/file3.txt:1:hello world", "/dir1/file3.txt:3:hello again", "/dir1/file4.py:1:print('hello')"]:
        assert line in content
    assert await run_tool(backend, "grep", {"pattern": "hello", "output_mode": "content", "-n": False}) == (
        '/file2.go:\tprintln("hello")\n/dir1/file3.txt:hello world\n/dir1/file3.txt:hello again\n'
        "/dir1/file4.py:print('hello')"
    )
    assert await run_tool(backend, "grep", {"pattern": "hello"}) == (
        "Found 3 files\n/file2.go\n/dir1/file3.txt\n/dir1/file4.py"
    )
    assert await run_tool(backend, "grep", {"pattern": "hello", "glob": "*.txt", "output_mode": "count"}) == (
        "/dir1/file3.txt:2\n\nFound 2 total occurrences across 1 file."
    )
    assert await run_tool(backend, "grep", {"pattern": "package", "path": "/dir2", "output_mode": "count"}) == (
        "/dir2/file5.go:1\n\nFound 1 total occurrence across 1 file."
    )
    assert await run_tool(backend, "grep", {"pattern": "HELLO", "-i": True, "type": "py"}) == (
        "Found 1 file\n/dir1/file4.py"
    )
    assert await run_tool(backend, "grep", {"pattern": "nothing"}) == "No files found"
    assert await run_tool(backend, "grep", {"pattern": "nothing", "output_mode": "content"}) == "No matches found"
    assert await run_tool(backend, "grep", {"pattern": "nothing", "output_mode": "count"}) == (
        "No matches found\n\nFound 0 total occurrences across 0 files."
    )
    with pytest.raises(GrepPatternError, match="invalid regex pattern"):
        await run_tool(backend, "grep", {"pattern": "("})
    with pytest.raises(GrepPatternError, match="pattern cannot be empty"):
        await run_tool(backend, "grep", {"pattern": ""})


async def test_grep_sorts_by_base_name_and_paginates(make_backend: Any) -> None:
    files = {
        "/zebra.txt": "match1\nmatch2\nmatch3",
        "/apple.txt": "match4\nmatch5",
        "/banana.txt": "match6\nmatch7\nmatch8",
    }
    backend = await seeded(make_backend, files)

    async def grep(**args: Any) -> list[str]:
        return (await run_tool(backend, "grep", {"pattern": "match", **args})).strip().split("\n")

    assert await grep() == ["Found 3 files", "/apple.txt", "/banana.txt", "/zebra.txt"]
    assert await grep(offset=1) == ["Found 3 files", "/banana.txt", "/zebra.txt"]
    assert await grep(head_limit=2) == ["Found 3 files", "/apple.txt", "/banana.txt"]
    assert await grep(offset=1, head_limit=1) == ["Found 3 files", "/banana.txt"]
    assert await grep(offset=100) == ["Found 3 files"]
    assert len(await grep(offset=-5)) == 4
    assert await grep(output_mode="content", head_limit=3) == [
        "/apple.txt:1:match4",
        "/apple.txt:2:match5",
        "/banana.txt:1:match6",
    ]
    assert len(await grep(output_mode="content", offset=2, head_limit=2)) == 2
    assert await grep(output_mode="count") == [
        "/apple.txt:2",
        "/banana.txt:3",
        "/zebra.txt:3",
        "",
        "Found 8 total occurrences across 3 files.",
    ]
    assert await grep(output_mode="count", offset=1, head_limit=1) == [
        "/banana.txt:3",
        "",
        "Found 8 total occurrences across 3 files.",
    ]


async def test_grep_context_and_multiline(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/context.txt": "line1\nline2\ntarget line\nline4\nline5\nline6"})
    lines = [(m.line, m.content) for m in await backend.grep("target", before_lines=2)]
    assert lines == [(1, "line1"), (2, "line2"), (3, "target line")]
    assert [m.line for m in await backend.grep("target", after_lines=2)] == [3, 4, 5]
    assert [m.line for m in await backend.grep("target", before_lines=-5, after_lines=-5)] == [3]
    out = await run_tool(backend, "grep", {"pattern": "target", "output_mode": "content", "-C": 1})
    assert out == "/context.txt:2:line2\n/context.txt:3:target line\n/context.txt:4:line4"
    await backend.write("/multiline.txt", "start\nmiddle line\nend")
    assert await backend.grep("start.*end", path="/multiline.txt") == []
    spanned = await backend.grep(r"start[\s\S]*end", path="/multiline.txt", multiline=True)
    assert [m.line for m in spanned] == [1, 2, 3]
    await backend.write("/m3.txt", "\nconst a = 1;\nfunction calculateTotal(\n  items,\n  discount\n) {\n  return 1;\n")
    found = await backend.grep(r"function calculateTotal\([^\)]*\)", path="/m3.txt", multiline=True)
    assert (6, ") {") in [(m.line, m.content) for m in found]


async def test_a_file_is_not_a_directory(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/a.txt": "x", "/d/b.txt": "y"})
    with pytest.raises(FilesystemError, match=r"cannot write /a.txt/c: /a.txt is a file"):
        await backend.write("/a.txt/c", "z")
    with pytest.raises(FilesystemError, match=r"cannot write /d: it is a directory"):
        await backend.write("/d", "z")
    with pytest.raises(BackendFileNotFoundError):
        await backend.read("/d")


async def test_delete_removes_the_file_and_empty_directories(make_backend: Any) -> None:
    backend = await seeded(make_backend, {"/keep.txt": "k", "/tasks/1.json": "{}"})
    await backend.delete("/tasks/1.json")
    await backend.delete("/tasks/1.json")  # already gone: no error
    assert await run_tool(backend, "ls", {"path": "/"}) == "keep.txt"


async def test_tool_arguments_are_type_checked() -> None:
    backend = InMemoryBackend()
    with pytest.raises(ToolArgumentsError, match="field 'offset'"):
        await run_tool(backend, "read_file", {"file_path": "/x", "offset": "two"})
    tools = {t.info().name: t for t in filesystem_tools(backend)}
    with pytest.raises(ToolArgumentsError, match="not JSON"):
        await tools["ls"].run("{")


class FakeShell:
    def __init__(self, response: ExecuteResponse) -> None:
        self.response = response
        self.commands: list[str] = []

    async def execute(self, command: str) -> ExecuteResponse:
        self.commands.append(command)
        return self.response


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (ExecuteResponse("hello world", 0), "hello world"),
        (ExecuteResponse("error: file not found", 1), "error: file not found\n[Command failed with exit code 1]"),
        (ExecuteResponse("partial output...", 0, True), "partial output...\n[Output was truncated due to size limits]"),
        (
            ExecuteResponse("error output...", 2, True),
            "error output...\n[Command failed with exit code 2]\n[Output was truncated due to size limits]",
        ),
        (ExecuteResponse("", 0), "[Command executed successfully with no output]"),
    ],
)
async def test_execute_tool_texts(response: ExecuteResponse, expected: str) -> None:
    shell = FakeShell(response)
    assert await execute_tool(shell).run('{"command": "echo hello world"}') == expected
    assert shell.commands == ["echo hello world"]


async def test_middleware_adds_six_tools_or_seven_with_a_shell() -> None:
    backend = InMemoryBackend()
    names = ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]
    assert [t.info().name for t in FilesystemMiddleware(backend).tools] == names
    with_shell = FilesystemMiddleware(backend, shell=FakeShell(ExecuteResponse("")))
    assert [t.info().name for t in with_shell.tools] == [*names, "execute"]
    custom = FilesystemMiddleware(backend, tool_descriptions={"ls": "custom ls"}, disabled_tools=["grep"])
    assert custom.tools[0].info().description == "custom ls" and "grep" not in [t.info().name for t in custom.tools]
    assert FilesystemMiddleware(backend).tools[0].info().description == LS_TOOL_DESCRIPTION
    with pytest.raises(ValueError, match="needs a backend or a shell"):
        FilesystemMiddleware()
    read = FilesystemMiddleware(backend).tools[1].info()
    assert read.parameters["required"] == ["file_path", "offset", "limit"]
    grep = FilesystemMiddleware(backend).tools[5].info().parameters["properties"]
    assert sorted(grep) == sorted(
        [
            "pattern",
            "path",
            "glob",
            "output_mode",
            "-C",
            "-B",
            "-A",
            "-n",
            "-i",
            "type",
            "head_limit",
            "offset",
            "multiline",
        ]
    )


async def test_before_agent_adds_the_tools_and_the_prompt() -> None:
    mw = FilesystemMiddleware(InMemoryBackend(), system_prompt="Use the files.")
    ctx = await mw.before_agent(ChatModelAgentContext("You help.", [], set()))
    assert ctx.instruction == "You help.\nUse the files."
    assert [t.info().name for t in ctx.tools] == ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]
    plain = await FilesystemMiddleware(InMemoryBackend()).before_agent(ChatModelAgentContext("You help.", [], set()))
    assert plain.instruction == "You help."


async def test_large_results_are_offloaded_only_when_asked() -> None:
    backend = InMemoryBackend()
    big = "\n".join(f"row {i}" for i in range(2000))

    async def endpoint(inp: ToolInput) -> ToolOutput:
        return ToolOutput(big if inp.name == "big" else "small")

    off = FilesystemMiddleware(backend)
    assert off.wrap_invokable_tool_call(endpoint) is endpoint  # opt-in, as Eino's current New
    on = FilesystemMiddleware(backend, large_result_tokens=100).wrap_invokable_tool_call(endpoint)
    assert (await on(ToolInput("small", "{}", "c0"))).result == "small"
    pointed = (await on(ToolInput("big", "{}", "c1"))).result
    assert pointed == large_result_pointer(big, "c1", "/large_tool_result/c1")
    assert pointed.startswith(
        "Tool result too large, the result of this tool call c1 was saved in the filesystem at this path: "
        "/large_tool_result/c1\n"
    )
    assert pointed.endswith(
        "Here are the first 10 lines of the result:\n" + "".join(f"{i + 1}: row {i}\n" for i in range(10))
    )
    assert await backend.read("/large_tool_result/c1") == big

    async def streaming(inp: ToolInput) -> StreamToolOutput:
        return StreamToolOutput(StreamReader.from_iterable([big[:5000], big[5000:]]))

    wrapped = FilesystemMiddleware(backend, large_result_tokens=100).wrap_streamable_tool_call(streaming)
    out = await wrapped(ToolInput("big", "{}", "c2"))
    assert [chunk async for chunk in out.result] == [large_result_pointer(big, "c2", "/large_tool_result/c2")]
