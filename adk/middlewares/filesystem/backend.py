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

``glob`` and ``grep`` are bounded (``adk.middlewares.filesystem._search``): they run off the event loop, glob
patterns match in linear time, grep's regex runs in a child process, and a search that takes longer than
``search_timeout`` seconds, would read more than ``max_search_bytes`` or matches more than ``max_grep_lines``
lines stops with :class:`~adk.errors.SearchLimitError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypedDict, TypeVar, Unpack, runtime_checkable

from adk.errors import BackendFileNotFoundError, FilesystemError, FileTooLargeError
from adk.middlewares.filesystem._glob import compile_glob
from adk.middlewares.filesystem._search import Budget, check_bound, grep_in_worker
from adk.middlewares.filesystem._vfs import (
    FileInfo,
    GrepMatch,
    apply_edit,
    compile_pattern,
    glob_files,
    grep_candidates,
    grep_results,
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
    * ``_load(path, strict=False)``: the text of the file (``BackendFileNotFoundError`` when none); with
      ``strict``, :class:`~adk.errors.EditError` for bytes that are not UTF-8 (else shown as U+FFFD);
    * ``_save(path, content)``, ``_remove(path)``.

    They may block (``LocalBackend`` runs them in a worker thread through ``_call``). Glob and grep are bounded by
    ``search_timeout`` (seconds), ``max_search_bytes`` (the file contents grep reads) and ``max_grep_lines``.
    """

    max_file_bytes: int | None = None
    search_timeout: float = 30.0
    max_search_bytes: int = 64 * 1024 * 1024
    max_grep_lines: int = 1_000_000

    def _set_search_bounds(self, search_timeout: float, max_search_bytes: int) -> None:
        owner = type(self).__name__
        check_bound(owner, "search_timeout", search_timeout)
        check_bound(owner, "max_search_bytes", max_search_bytes, integer=True)
        self.search_timeout = search_timeout
        self.max_search_bytes = max_search_bytes

    def _files(self, directory: str) -> list[tuple[str, int, str]]:
        raise NotImplementedError

    def _load(self, path: str, *, strict: bool = False) -> str:
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
        updated = apply_edit(self._load(path, strict=True), path, old, new, replace_all)
        self._check_size(path, len(updated.encode("utf-8", "surrogatepass")))
        self._save(path, updated)

    def _contents(self, paths: list[str], budget: Budget) -> list[tuple[str, str]]:
        """The texts grep searches, at most ``max_search_bytes`` in all (files that vanished or grew over
        ``max_file_bytes`` since they were listed are left out)."""
        out: list[tuple[str, str]] = []
        total = 0
        for p in paths:
            try:
                text = self._load(p)
            except (BackendFileNotFoundError, FileTooLargeError):
                continue
            total += len(text)
            if total > self.max_search_bytes:
                raise budget.over(f"it would read more than {self.max_search_bytes} bytes (max_search_bytes)")
            out.append((p, text))
        return out

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
        directory = normalize(path)
        compile_glob(pattern)  # a malformed pattern fails before the walk
        budget = Budget("glob", pattern, directory, self.search_timeout)
        files = await self._call(self._files, "/" if pattern.startswith("/") else directory)
        return await budget.off_loop(glob_files, pattern, directory, files)

    async def grep(self, pattern: str, **options: Unpack[GrepOptions]) -> list[GrepMatch]:
        """See :class:`Backend`."""
        regex = compile_pattern(pattern, options.get("case_insensitive", False))
        path = options.get("path", "")
        directory = normalize(path) if path else "/"
        glob, file_type = options.get("glob", ""), options.get("file_type", "")
        if glob:
            compile_glob(glob)
        budget = Budget("grep", pattern, directory, self.search_timeout)
        sizes = {p: size for p, size, _ in await self._call(self._files, directory)}
        limit = self.max_file_bytes
        paths = [
            p  # a huge file is not searched (read refuses it with FileTooLargeError)
            for p in await budget.off_loop(grep_candidates, sizes, directory, glob, file_type)
            if limit is None or sizes[p] <= limit
        ]
        if sum(sizes[p] for p in paths) > self.max_search_bytes:
            raise budget.over(f"it would read more than {self.max_search_bytes} bytes (max_search_bytes)")
        contents = await self._call(self._contents, paths, budget)
        found = await grep_in_worker(
            regex,
            options.get("multiline", False),
            [text for _, text in contents],
            budget,
            max_lines=self.max_grep_lines,
        )
        return await budget.off_loop(
            grep_results,
            contents,
            found,
            max(options.get("before_lines", 0), 0),
            max(options.get("after_lines", 0), 0),
        )

    async def delete(self, file_path: str) -> None:
        """See :class:`Backend`."""
        await self._call(self._delete, file_path)
