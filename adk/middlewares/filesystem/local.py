"""``LocalBackend``: the virtual file system on disk, rooted at a directory.

``/`` is ``root``; the model only ever sees virtual paths (``/notes.txt``), never a host path, and an absolute
host path it gives is just a virtual path under ``root`` (``/etc/passwd`` is ``root/etc/passwd``). Every path is
resolved inside ``root`` before anything is opened:

* ``..`` climbing above the root, NUL bytes and over-long paths are refused (:class:`~adk.errors.UnsafePathError`)
  by the normalization both backends share;
* the host path is resolved (``os.path.realpath``: every symlink followed) and must stay inside the resolved
  ``root``, else :class:`~adk.errors.UnsafePathError` ("resolves outside the root"); the resolved path is then
  opened with ``O_NOFOLLOW``, so a last part swapped for a symlink after the check is refused by the OS;
* listings, glob and grep walk the tree without following directory symlinks and skip file symlinks that
  resolve outside the root, anything that is not a regular file (a FIFO, a socket, a device) and names no
  virtual path can hold (a newline or another control character);
* files are opened without blocking and checked to be regular files before they are read or written, so a FIFO
  inside the root is refused instead of waiting forever for a writer;
* reads, edits and grep bound what they load (``max_file_bytes``: a bigger file is refused with
  :class:`~adk.errors.FileTooLargeError` by read and edit, and skipped by grep), writes bound what they store;
* ``delete`` removes directories it leaves empty (up to the root), as the in-memory backend has no empty
  directories.

Files are UTF-8 text: bytes that do not decode are shown as U+FFFD by read and grep, and edit refuses such a file
(:class:`~adk.errors.EditError`), leaving its bytes as they are.
The checks guard against a model's paths, not against another process racing to swap directories inside the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

from adk.errors import BackendFileNotFoundError, EditError, FilesystemError, UnsafePathError
from adk.middlewares.filesystem._vfs import has_control_character, is_a_directory, not_a_directory
from adk.middlewares.filesystem.backend import TreeBackend

__all__ = ["LocalBackend"]

T = TypeVar("T")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO waits for its other end without it


def _iso(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).isoformat()


class LocalBackend(TreeBackend):
    """The virtual file system stored under ``root`` on disk (see the module docstring).

    Args:
        root: the directory that is ``/`` (created if missing, unless ``create=False``).
        max_file_bytes: the largest file read, edited, searched or written, in bytes (default 10 MiB).
        max_files: the most files a listing, glob or grep walks (default 100,000); past it the walk stops.
        search_timeout: the seconds a glob or grep may take (default 30; past it
            :class:`~adk.errors.SearchLimitError`).
        max_search_bytes: the most file contents one grep reads (default 64 MiB).

    Raises:
        NotADirectoryError: ``root`` exists and is not a directory.
        FileNotFoundError: ``root`` does not exist and ``create`` is False.
        ValueError: a bound that is not a positive number.

    Example::

        backend = LocalBackend(tmp_path)
        await backend.write("/notes.txt", "hello")  # tmp_path / "notes.txt"
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = 10 * 1024 * 1024,
        max_files: int = 100_000,
        search_timeout: float = 30.0,
        max_search_bytes: int = 64 * 1024 * 1024,
        create: bool = True,
    ) -> None:
        path = Path(root)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.exists():
            raise FileNotFoundError(f"LocalBackend root {str(root)!r} does not exist")
        if not path.is_dir():
            raise NotADirectoryError(f"LocalBackend root {str(root)!r} is not a directory")
        self._set_search_bounds(search_timeout, max_search_bytes)
        self.root = os.path.realpath(path)
        self._prefix = self.root if self.root.endswith(os.sep) else self.root + os.sep
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files

    def __repr__(self) -> str:
        return f"LocalBackend({self.root!r}, max_file_bytes={self.max_file_bytes})"

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args)

    # --- resolving a virtual path ---

    def _host(self, path: str, named: str | None = None) -> str:
        """The resolved host path of the normalized virtual ``path``, checked to be inside the root (the error
        names ``named``, the path the caller was given, when it differs)."""
        host = os.path.join(self.root, path.lstrip("/")) if path != "/" else self.root
        real = os.path.realpath(host)
        if real != self.root and not real.startswith(self._prefix):
            raise UnsafePathError(named or path, "it resolves outside the root (through a symlink)")
        return real

    def _virtual(self, host: str) -> str:
        rel = os.path.relpath(host, self.root)
        return "/" if rel == "." else "/" + rel.replace(os.sep, "/")

    # --- the storage primitives ---

    def _files(self, directory: str) -> list[tuple[str, int, str]]:
        top = self._host(directory)
        try:
            st = os.stat(top)
        except OSError:  # missing, or below a file
            return []
        if stat.S_ISREG(st.st_mode):
            return [(directory, st.st_size, _iso(st.st_mtime))]
        out: list[tuple[str, int, str]] = []
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not has_control_character(d))
            for name in sorted(filenames):
                if has_control_character(name):
                    continue  # no virtual path names it, and a newline would make up entries in a listing
                host = os.path.join(dirpath, name)
                entry = self._entry(host)
                if entry is not None:
                    out.append(entry)
                    if len(out) >= self.max_files:
                        return out
        return out

    def _entry(self, host: str) -> tuple[str, int, str] | None:
        """A walked file as ``(virtual path, size, modified)``; None for a symlink out of the root or to a
        non-file, and for anything that is not a regular file."""
        try:
            st = os.lstat(host)
            if stat.S_ISLNK(st.st_mode):
                real = os.path.realpath(host)
                if not real.startswith(self._prefix):
                    return None
                st = os.stat(real)
            if not stat.S_ISREG(st.st_mode):
                return None
        except OSError:
            return None
        return self._virtual(host), st.st_size, _iso(st.st_mtime)

    def _load(self, path: str, *, strict: bool = False) -> str:
        host = self._host(path)
        try:
            fd = os.open(host, os.O_RDONLY | _NOFOLLOW | _BINARY | _NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EISDIR, errno.ENOTDIR):
                raise BackendFileNotFoundError(path) from None
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(path, "it is a symlink") from None
            raise FilesystemError(f"cannot read {path}: {exc.strerror}", path) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise BackendFileNotFoundError(path)
        with os.fdopen(fd, "rb") as f:
            self._check_size(path, st.st_size)
            limit = self.max_file_bytes
            data = f.read(limit + 1 if limit is not None else -1)
        self._check_size(path, len(data))  # grown since the stat
        if not strict:
            return data.decode("utf-8", "replace")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EditError(
                f"cannot edit {path}: it is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "rewriting it would replace its bytes",
                path,
            ) from None

    def _save(self, path: str, content: str) -> None:
        if path == "/":
            raise FilesystemError(is_a_directory(path), path)
        parent_virtual = path.rsplit("/", 1)[0] or "/"
        parent = self._make_dirs(parent_virtual, path)
        host = os.path.join(parent, path.rsplit("/", 1)[1])
        if os.path.islink(host):
            host = self._host(path)  # a symlink inside the root: write its target (checked)
        if os.path.isdir(host):
            raise FilesystemError(is_a_directory(path), path)
        data = content.encode("utf-8", "surrogatepass")
        try:
            fd = os.open(host, os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _BINARY | _NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(path, "it is a symlink") from None
            if exc.errno == errno.ENXIO:  # a FIFO nobody reads
                raise FilesystemError(f"cannot write {path}: it is not a regular file", path) from None
            raise FilesystemError(f"cannot write {path}: {exc.strerror}", path) from None
        with os.fdopen(fd, "wb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FilesystemError(f"cannot write {path}: it is not a regular file", path)
            os.ftruncate(fd, 0)  # only now: a FIFO or a device is never truncated
            f.write(data)

    def _make_dirs(self, directory: str, path: str) -> str:
        """Create the virtual ``directory`` part by part (each checked), and return its host path."""
        current = self.root
        walked = ""
        for part in [p for p in directory.split("/") if p]:
            walked += "/" + part
            nxt = os.path.join(current, part)
            if os.path.islink(nxt):
                nxt = self._host(walked, path)
            if os.path.isdir(nxt):
                current = nxt
                continue
            if os.path.exists(nxt):
                raise FilesystemError(not_a_directory(path, walked), path)
            os.mkdir(nxt)
            current = nxt
        return current

    def _remove(self, path: str) -> None:
        host = self._host(path)
        try:
            if not os.path.isfile(host):
                return
            os.unlink(host)
        except FileNotFoundError:
            return
        parent = os.path.dirname(host)
        while parent != self.root and parent.startswith(self._prefix):
            try:
                os.rmdir(parent)  # only when empty
            except OSError:
                break
            parent = os.path.dirname(parent)
