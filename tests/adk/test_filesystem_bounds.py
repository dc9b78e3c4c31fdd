"""Glob and grep stay bounded whatever the pattern (off the event loop, in time and size), grep's ``$`` is Eino's
(the end of the text), the write and edit tools refuse calls that lack their text, and a path cannot hold a
newline; each on both InMemoryBackend and LocalBackend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import Process

from adk.errors import GrepPatternError, SearchLimitError, UnsafePathError
from adk.middlewares import Backend, InMemoryBackend, LocalBackend
from adk.middlewares.filesystem import _search, filesystem_tools
from compose.errors import ToolArgumentsError

pytestmark = pytest.mark.anyio

# (a+)+$ on 40 a's and a b: 2**40 steps of Python's backtracking re (hours), holding the interpreter lock
BACKTRACKING = ("(a+)+$", "a" * 40 + "b")


@pytest.fixture(params=["memory", "local"])
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def make(files: dict[str, str], **bounds: Any) -> Backend:
        backend: Backend
        if request.param == "memory":
            backend = InMemoryBackend(files, **bounds)
        else:
            backend = LocalBackend(tmp_path / "root", **bounds)
            for path, content in files.items():
                (tmp_path / "root" / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / "root" / path.lstrip("/")).write_text(content)
        return backend

    return make


async def run_tool(backend: Backend, name: str, args: dict[str, Any]) -> str:
    tools = {t.info().name: t for t in filesystem_tools(backend)}
    return await tools[name].run(json.dumps(args))


async def test_a_backtracking_grep_is_stopped_at_the_deadline_while_other_calls_go_on(make_backend: Any) -> None:
    pattern, line = BACKTRACKING
    backend = make_backend({"/evil.txt": f"{line}\n", "/notes.txt": "hello"}, search_timeout=2.0)
    order: list[str] = []

    async def grep() -> None:
        with pytest.raises(SearchLimitError, match=r"grep '\(a\+\)\+\$' in / stopped: it took longer than 2s") as info:
            await backend.grep(pattern)
        assert (info.value.operation, info.value.pattern, info.value.path) == ("grep", pattern, "/")
        order.append("grep stopped")

    async with anyio.create_task_group() as tg:
        tg.start_soon(grep)
        await anyio.lowlevel.checkpoint()  # the grep starts (in-memory, it used to run to its end right here)
        assert await backend.read("/notes.txt") == "hello"
        order.append("read")
    assert order == ["read", "grep stopped"]
    # the same pattern on harmless text, and an ordinary search, still answer
    assert [m.line for m in await backend.grep(pattern, path="/notes.txt")] == []
    assert [m.path for m in await backend.grep("hel+o")] == ["/notes.txt"]


async def test_a_cancelled_grep_kills_its_worker(make_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pattern, line = BACKTRACKING
    backend = make_backend({"/evil.txt": line}, search_timeout=3600.0)
    started = anyio.Event()
    workers: list[Process] = []

    async def open_process(*args: Any, **kwargs: Any) -> Process:
        workers.append(await anyio.open_process(*args, **kwargs))
        started.set()
        return workers[-1]

    monkeypatch.setattr(_search, "open_process", open_process)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(backend.grep, pattern)
            await started.wait()
            scope.cancel()
    # cancelled (not after the hour's deadline), the worker killed and reaped
    assert scope.cancelled_caught and len(workers) == 1 and workers[0].returncode is not None


async def test_a_grep_over_its_size_bound_is_refused(make_backend: Any) -> None:
    backend = make_backend({"/a.txt": "x" * 600, "/b.txt": "x" * 600}, max_search_bytes=1000)
    with pytest.raises(SearchLimitError, match=r"more than 1000 bytes \(max_search_bytes\)"):
        await backend.grep("x")
    assert [m.path for m in await backend.grep("x", path="/a.txt")] == ["/a.txt"]


async def test_a_glob_with_many_stars_matches_in_linear_time(make_backend: Any) -> None:
    name = "a" * 250
    backend = make_backend({f"/{name}": "x", "/d/deep.txt": "y"})
    # as a backtracking regex, 12 stars on 250 characters take about 250**12 steps
    assert await backend.glob("*a" * 12 + "*b") == []
    assert [i.path for i in await backend.glob("*a" * 12 + "*")] == [name]
    assert [i.path for i in await backend.glob("/" + "**/" * 12 + "*.txt")] == ["/d/deep.txt"]
    assert await backend.grep("x", glob="*a" * 12 + "*b") == []
    with pytest.raises(GrepPatternError, match="longer than 1024"):
        await backend.glob("*" * 1025)
    with pytest.raises(GrepPatternError, match="more than 256 alternatives"):
        await backend.glob("{a,b}" * 9)
    with pytest.raises(GrepPatternError, match="more than 256 alternatives"):
        await backend.grep("x", glob="{a,b}" * 9)


async def test_multiline_dollar_is_the_end_of_the_text_as_in_eino(make_backend: Any) -> None:
    backend = make_backend({"/w.txt": "hello world\nbye world\n", "/p.txt": "costs $5\n"})
    assert await backend.grep("world$", multiline=True) == []  # Go: the text ends with a newline
    assert [m.line for m in await backend.grep("world\n$", multiline=True)] == [2, 3]
    assert [m.line for m in await backend.grep("(?m)world$", multiline=True)] == [1, 2]
    assert [m.line for m in await backend.grep("(?m:world$)", multiline=True)] == [1, 2]
    assert [m.line for m in await backend.grep("world$")] == [1, 2]  # one line at a time: its end
    assert [m.path for m in await backend.grep(r"\$5")] == ["/p.txt"]
    assert [m.path for m in await backend.grep("[$]5")] == ["/p.txt"]


async def test_write_and_edit_without_their_text_are_refused(make_backend: Any) -> None:
    backend = make_backend({"/keep.txt": "important text"})
    with pytest.raises(ToolArgumentsError, match="tool 'write_file' field 'content': is required") as info:
        await run_tool(backend, "write_file", {"file_path": "/keep.txt"})
    assert info.value.field == "content"
    with pytest.raises(ToolArgumentsError, match=r"field 'content': is required \(unknown arguments: contnet\)"):
        await run_tool(backend, "write_file", {"file_path": "/keep.txt", "contnet": "x"})
    with pytest.raises(ToolArgumentsError, match="tool 'edit_file' field 'new_string': is required"):
        await run_tool(backend, "edit_file", {"file_path": "/keep.txt", "old_string": "important"})
    with pytest.raises(ToolArgumentsError, match="field 'old_string': is required"):
        await run_tool(backend, "edit_file", {"file_path": "/keep.txt", "old_string": None, "new_string": "x"})
    assert await backend.read("/keep.txt") == "important text"
    # an empty text is a text: the file is emptied, the string removed
    await run_tool(backend, "edit_file", {"file_path": "/keep.txt", "old_string": "important ", "new_string": ""})
    assert await backend.read("/keep.txt") == "text"
    await run_tool(backend, "write_file", {"file_path": "/keep.txt", "content": ""})
    assert await backend.read("/keep.txt") == ""


async def test_a_path_with_a_newline_is_refused(make_backend: Any) -> None:
    backend = make_backend({"/a.txt": "x"})
    for path in ("/made\nup.txt", "/d\r/x", "/tab\there"):
        with pytest.raises(UnsafePathError, match="control character") as info:
            await backend.write(path, "x")
        assert info.value.path == path
    assert await run_tool(backend, "ls", {"path": "/"}) == "a.txt"
