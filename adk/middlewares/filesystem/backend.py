"""The filesystem backend protocol (Eino's ``filesystem.Backend``, plus ``delete``) and the shared logic of the
built-in backends.

A backend presents a virtual file system whose root is ``/``; every path a model gives is normalized first
(``adk.middlewares.filesystem._vfs.normalize``: relative paths are under ``/``, ``..`` may not climb above it,
NUL bytes and over-long paths are refused with :class:`~adk.errors.UnsafePathError`). :class:`TreeBackend` holds
every operation once, over four primitives a storage implements, so :class:`~adk.middlewares.InMemoryBackend`
and :class:`~adk.middlewares.LocalBackend` answer the same calls with the same outputs.

Where pyeino differs from Eino's in-memory backend: listings (``ls``, ``glob``) are sorted by path and grep
searches files in path order (Eino's come in map order); a file of more than ``max_file_bytes`` is refused by
``read``/``edit`` (:class:`~adk.errors.FileTooLargeError`) and skipped by ``grep``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypedDict, TypeVar, Unpack, runtime_checkable

from adk.errors import BackendFileNotFoundError, FilesystemError, FileTooLargeError
from adk.middlewares.filesystem._vfs import (
    FileInfo,
    GrepMatch,
    apply_edit,
    compile_pattern,
    glob_files,
    grep_candidates,
    grep_files,
    is_a_directory,
    ls_files,
    normalize,
    slice_lines,
)

__all__ = ["Backend", "FileInfo", "GrepMatch", "GrepOptions", "TreeBackend"]

T = TypeVar("T")


class GrepOptions(TypedDict, total=False):
    """The keyword options of :meth:`Backend.grep`; each may be left out.

    Attributes:
        path: the file or directory searched (``""``, the default: the whole tree).
        glob: only the files matching this doublestar pattern (against the path relative to ``path`` when it has
            a ``/`` or ``**``, else the file name); ``""``: every file.
        file_type: only the files of this type (``"py"``, ``"js"``, ... or a bare extension); ``""``: every file.
        case_insensitive: match regardless of case (default False).
        multiline: match against the whole content, so that a match may span lines (default False).
        before_lines: context lines before each match (default 0; negative counts as 0).
        after_lines: context lines after each match (default 0; negative counts as 0).
    """

    path: str
    glob: str
    file_type: str
    case_insensitive: bool
    multiline: bool
    before_lines: int
    after_lines: int


@runtime_checkable
class Backend(Protocol):
    """What the filesystem tools need of a store of files (Eino's ``Backend``; ``delete`` for plantask).

    Paths are virtual (``/`` is the store's root). Errors are :class:`~adk.errors.FilesystemError` subclasses.
    """

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The entries directly in ``path`` (names only), or the file ``path`` itself."""
        ...

    async def read(self, file_path: str, *, offset: int = 1, limit: int = 0) -> str:
        """Lines ``offset`` (1-based) to ``offset + limit - 1`` of the file (``limit <= 0``: all)."""
        ...

    async def write(self, file_path: str, content: str) -> None:
        """Create or overwrite the file."""
        ...

    async def edit(self, file_path: str, old_string: str, new_string: str, *, replace_all: bool = False) -> None:
        """Replace ``old_string`` (once, and it must be unique; or everywhere with ``replace_all``)."""
        ...

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """The files matching the doublestar ``pattern`` (relative to ``path`` unless absolute)."""
        ...

    async def grep(self, pattern: str, **options: Unpack[GrepOptions]) -> list[GrepMatch]:
        """The lines matching the regex ``pattern`` (and their context lines); the options are
        :class:`GrepOptions`."""
        ...

    async def delete(self, file_path: str) -> None:
        """Remove the file (no error when there is none)."""
        ...


class TreeBackend:
    """Every backend operation over four storage primitives (subclasses implement them):

    * ``_files(directory)``: ``(path, size, modified_at)`` of every file in or at the normalized ``directory``;
    * ``_load(path)``: the text of the file (``BackendFileNotFoundError`` when none);
    * ``_save(path, content)``, ``_remove(path)``.

    They may block (``LocalBackend`` runs them in a worker thread through ``_call``).
    """

    max_file_bytes: int | None = None

    def _files(self, directory: str) -> list[tuple[str, int, str]]:
        raise NotImplementedError

    def _load(self, path: str) -> str:
        raise NotImplementedError

    def _save(self, path: str, content: str) -> None:
        raise NotImplementedError

    def _remove(self, path: str) -> None:
        raise NotImplementedError

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a synchronous body (in a worker thread for a backend whose storage blocks)."""
        return fn(*args)

    def _check_size(self, path: str, size: int) -> None:
        limit = self.max_file_bytes
        if limit is not None and size > limit:
            raise FileTooLargeError(path, size, limit)

    # --- the operations, each a synchronous body run through _call ---

    def _ls(self, path: str) -> list[FileInfo]:
        directory = normalize(path)
        return ls_files(directory, self._files(directory))

    def _read(self, file_path: str, offset: int, limit: int) -> str:
        return slice_lines(self._load(normalize(file_path)), offset, limit)

    def _write(self, file_path: str, content: str) -> None:
        path = normalize(file_path)
        if path == "/":
            raise FilesystemError(is_a_directory(path), path)
        self._check_size(path, len(content.encode("utf-8", "surrogatepass")))
        self._save(path, content)

    def _edit(self, file_path: str, old: str, new: str, replace_all: bool) -> None:
        path = normalize(file_path)
        updated = apply_edit(self._load(path), path, old, new, replace_all)
        self._check_size(path, len(updated.encode("utf-8", "surrogatepass")))
        self._save(path, updated)

    def _glob(self, pattern: str, path: str) -> list[FileInfo]:
        directory = normalize(path)
        files = self._files("/" if pattern.startswith("/") else directory)
        return glob_files(pattern, directory, files)

    def _grep(self, pattern: str, options: GrepOptions) -> list[GrepMatch]:
        regex = compile_pattern(pattern, options.get("case_insensitive", False))
        path = options.get("path", "")
        directory = normalize(path) if path else "/"
        sizes = {p: size for p, size, _ in self._files(directory)}
        contents: list[tuple[str, str]] = []
        limit = self.max_file_bytes
        for p in grep_candidates(sizes, directory, options.get("glob", ""), options.get("file_type", "")):
            if limit is not None and sizes[p] > limit:
                continue  # a huge file is not searched (read refuses it with FileTooLargeError)
            try:
                contents.append((p, self._load(p)))
            except (BackendFileNotFoundError, FileTooLargeError):
                continue  # removed (or grown) since it was listed
        return grep_files(
            contents,
            regex,
            multiline=options.get("multiline", False),
            before=max(options.get("before_lines", 0), 0),
            after=max(options.get("after_lines", 0), 0),
        )

    def _delete(self, file_path: str) -> None:
        self._remove(normalize(file_path))

    # --- the Backend protocol ---

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """See :class:`Backend`."""
        return await self._call(self._ls, path)

    async def read(self, file_path: str, *, offset: int = 1, limit: int = 0) -> str:
        """See :class:`Backend`."""
        return await self._call(self._read, file_path, offset, limit)

    async def write(self, file_path: str, content: str) -> None:
        """See :class:`Backend`."""
        await self._call(self._write, file_path, content)

    async def edit(self, file_path: str, old_string: str, new_string: str, *, replace_all: bool = False) -> None:
        """See :class:`Backend`."""
        await self._call(self._edit, file_path, old_string, new_string, replace_all)

    async def glob(self, pattern: str, path: str = "/") -> list[FileInfo]:
        """See :class:`Backend`."""
        return await self._call(self._glob, pattern, path)

    async def grep(self, pattern: str, **options: Unpack[GrepOptions]) -> list[GrepMatch]:
        """See :class:`Backend`."""
        return await self._call(self._grep, pattern, options)

    async def delete(self, file_path: str) -> None:
        """See :class:`Backend`."""
        await self._call(self._delete, file_path)
