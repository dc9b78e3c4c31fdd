"""LocalBackend keeps every path inside its root (escapes, symlinks out, NUL bytes, very long paths refused with a
typed error naming the path, nothing outside touched), bounds what it reads and writes; LocalShell runs in its
root with a timeout and bounded output."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from adk.errors import BackendFileNotFoundError, EditError, FilesystemError, FileTooLargeError, UnsafePathError
from adk.middlewares import FilesystemMiddleware, InMemoryBackend, LocalBackend, LocalShell
from adk.middlewares.filesystem import filesystem_tools

pytestmark = pytest.mark.anyio


def snapshot(directory: Path) -> dict[str, tuple[int, float]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime) if p.is_file() else (-1, 0.0)
        for p in sorted(directory.rglob("*"))
    }


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, Path]:
    """A root and, beside it, a sentinel directory that nothing may touch (with a secret, and symlinks to it)."""
    root = tmp_path / "root"
    root.mkdir()
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "secret.txt").write_text("top secret\n")
    (root / "inside.txt").write_text("fine\n")
    (root / "out_file").symlink_to(sentinel / "secret.txt")
    (root / "out_dir").symlink_to(sentinel, target_is_directory=True)
    (root / "in_link").symlink_to(root / "inside.txt")
    return root, sentinel


ESCAPES = ["../sentinel/secret.txt", "/../sentinel/secret.txt", "a/../../sentinel/x.txt", "/a/b/../../../x"]


@pytest.mark.parametrize("path", ESCAPES)
async def test_dot_dot_escapes_are_refused(sandbox: tuple[Path, Path], path: str) -> None:
    root, sentinel = sandbox
    before = snapshot(sentinel)
    backend = LocalBackend(root)
    for op in (backend.read(path), backend.write(path, "pwned"), backend.edit(path, "top", "x"), backend.delete(path)):
        with pytest.raises(UnsafePathError, match="climbs above the root") as info:
            await op
        assert info.value.path == path
    assert snapshot(sentinel) == before


async def test_absolute_host_paths_are_virtual_paths_under_the_root(sandbox: tuple[Path, Path]) -> None:
    root, sentinel = sandbox
    before = snapshot(sentinel)
    backend = LocalBackend(root)
    host_path = str(sentinel / "secret.txt")
    with pytest.raises(BackendFileNotFoundError) as info:
        await backend.read(host_path)
    assert str(info.value) == f"file not found: {host_path}"  # the virtual path, under root
    await backend.write(host_path, "written inside")
    assert (root / host_path.lstrip("/")).read_text() == "written inside"
    assert snapshot(sentinel) == before


async def test_symlinks_out_of_the_root_are_refused_and_not_listed(sandbox: tuple[Path, Path]) -> None:
    root, sentinel = sandbox
    before = snapshot(sentinel)
    backend = LocalBackend(root)
    for path in ["/out_file", "/out_dir/secret.txt", "/out_dir/new.txt"]:
        for op in (backend.read(path), backend.write(path, "pwned"), backend.edit(path, "top", "x")):
            with pytest.raises(UnsafePathError, match="resolves outside the root") as info:
                await op
            assert info.value.path == path
    assert await backend.read("/in_link") == "fine\n"  # a symlink inside the root is followed
    tools = {t.info().name: t for t in filesystem_tools(backend)}
    assert await tools["ls"].run('{"path": "/"}') == "in_link\ninside.txt"
    assert "secret" not in await tools["grep"].run('{"pattern": "secret", "output_mode": "content"}')
    assert await tools["glob"].run('{"pattern": "**/*"}') == "in_link\ninside.txt"
    assert snapshot(sentinel) == before


async def test_nul_bytes_and_very_long_paths_are_refused(sandbox: tuple[Path, Path]) -> None:
    root, sentinel = sandbox
    before = snapshot(sentinel)
    for backend in (LocalBackend(root), InMemoryBackend()):
        with pytest.raises(UnsafePathError, match="NUL byte"):
            await backend.write("/a\x00.txt", "x")
        with pytest.raises(UnsafePathError, match="longer than 255 bytes"):
            await backend.write("/" + "a" * 300, "x")
        with pytest.raises(UnsafePathError, match="longer than 4096 characters"):
            await backend.read("/a" * 3000)
    assert snapshot(sentinel) == before
    assert sorted(os.listdir(root)) == ["in_link", "inside.txt", "out_dir", "out_file"]


async def test_huge_files_are_bounded(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path, max_file_bytes=1000)
    with (tmp_path / "huge.log").open("wb") as f:
        f.truncate(50_000_000)  # sparse: 50 MB that is never read
    with pytest.raises(FileTooLargeError, match="50000000 bytes, the limit is 1000") as info:
        await backend.read("/huge.log")
    assert info.value.size == 50_000_000 and info.value.limit == 1000
    with pytest.raises(FileTooLargeError):
        await backend.edit("/huge.log", "a", "b")
    with pytest.raises(FileTooLargeError):
        await backend.write("/big.txt", "x" * 1001)
    assert not (tmp_path / "big.txt").exists()
    await backend.write("/small.txt", "needle")
    assert [m.path for m in await backend.grep("needle|\x00")] == ["/small.txt"]  # the huge file is skipped
    memory = InMemoryBackend(max_file_bytes=10)
    with pytest.raises(FileTooLargeError):
        await memory.write("/x", "01234567890")


async def test_the_model_never_sees_a_host_path(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tools = {t.info().name: t for t in filesystem_tools(LocalBackend(root))}
    outputs = [
        await tools["ls"].run('{"path": "/"}'),
        await tools["glob"].run('{"pattern": "**/*", "path": "/"}'),
        await tools["grep"].run('{"pattern": "fine", "output_mode": "content"}'),
    ]
    for name, args in [("read_file", {"file_path": "/nope"}), ("read_file", {"file_path": "/out_file"})]:
        try:
            await tools[name].run(json.dumps(args))
        except Exception as exc:
            outputs.append(str(exc))
    assert outputs[2] == "/inside.txt:1:fine\n/in_link:1:fine" or outputs[2] == "/in_link:1:fine\n/inside.txt:1:fine"
    assert all(str(root) not in out for out in outputs)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")
async def test_local_shell_runs_in_its_root_with_bounds(tmp_path: Path) -> None:
    real = os.path.realpath(tmp_path)  # noqa: ASYNC240
    shell = LocalShell(tmp_path, timeout=5)
    done = await shell.execute("pwd; echo oops >&2; exit 3")
    assert done.output == f"{real}\noops\n" and done.exit_code == 3 and not done.truncated
    cut = await LocalShell(tmp_path, max_output_bytes=10).execute("yes | head -c 100000")
    assert cut.truncated and len(cut.output) == 10 and cut.exit_code == 0
    slow = await LocalShell(tmp_path, timeout=0.5).execute("echo started; sleep 30")
    assert slow.exit_code is None and slow.output == "started\n\n[Command timed out after 0.5s and was killed]"
    tool = FilesystemMiddleware(shell=shell).tools[0]
    assert tool.info().name == "execute"
    assert await tool.run('{"command": "true"}') == "[Command executed successfully with no output]"
    assert await tool.run('{"command": "exit 7"}') == "\n[Command failed with exit code 7]"


@pytest.mark.parametrize(
    "bound", [{"timeout": math.nan}, {"timeout": math.inf}, {"timeout": 0}, {"max_output_bytes": 0}]
)
def test_local_shell_refuses_a_bound_that_is_not_a_positive_number(tmp_path: Path, bound: dict[str, float]) -> None:
    (name,) = bound
    with pytest.raises(ValueError, match=f"LocalShell {name} must be a positive"):
        LocalShell(tmp_path, **bound)  # type: ignore[arg-type]


async def test_edit_refuses_a_file_that_is_not_utf8_and_keeps_its_bytes(tmp_path: Path) -> None:
    data = b"caf\xe9 ok\n\xff\xfe binary\n"
    (tmp_path / "latin1.txt").write_bytes(data)
    backend = LocalBackend(tmp_path)
    assert await backend.read("/latin1.txt") == "caf\ufffd ok\n\ufffd\ufffd binary\n"  # shown, as documented
    with pytest.raises(EditError, match=r"cannot edit /latin1.txt: it is not UTF-8 text \(byte 0xe9 at offset 3\)"):
        await backend.edit("/latin1.txt", "ok", "fine")
    assert (tmp_path / "latin1.txt").read_bytes() == data


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
async def test_a_fifo_inside_the_root_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    backend = LocalBackend(tmp_path)
    with pytest.raises(BackendFileNotFoundError):
        await backend.read("/pipe")  # opening it for reading used to wait for a writer forever
    with pytest.raises(FilesystemError, match="cannot write /pipe: it is not a regular file"):
        await backend.write("/pipe", "x")
    with pytest.raises(BackendFileNotFoundError):
        await backend.edit("/pipe", "a", "b")
    await backend.write("/notes.txt", "x")
    assert [m.path for m in await backend.grep("x")] == ["/notes.txt"]
    assert [i.path for i in await backend.ls("/")] == ["notes.txt"]


async def test_a_name_with_a_newline_on_disk_is_not_listed(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text("x")
    (tmp_path / "made\nup.txt").write_text("x")  # would be listed as two entries, 'made' and 'up.txt'
    (tmp_path / "dir\nx").mkdir()
    (tmp_path / "dir\nx" / "inner.txt").write_text("x")
    tools = {t.info().name: t for t in filesystem_tools(LocalBackend(tmp_path))}
    assert await tools["ls"].run('{"path": "/"}') == "real.txt"
    assert await tools["glob"].run('{"pattern": "**/*"}') == "real.txt"
    assert await tools["grep"].run('{"pattern": "x"}') == "Found 1 file\n/real.txt"
