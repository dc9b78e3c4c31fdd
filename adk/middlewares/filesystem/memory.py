"""``InMemoryBackend``: files in a dict (Eino's ``filesystem.NewInMemoryBackend``)."""

from __future__ import annotations

from datetime import UTC, datetime

from adk.errors import BackendFileNotFoundError, FilesystemError
from adk.middlewares.filesystem._vfs import is_a_directory, not_a_directory, under
from adk.middlewares.filesystem.backend import TreeBackend

__all__ = ["InMemoryBackend"]


class InMemoryBackend(TreeBackend):
    """A virtual file system in memory: only files exist (a directory is the prefix of a file's path).

    Args:
        files: initial files, ``{path: content}``.
        max_file_bytes: refuse writes (and edits) of more UTF-8 bytes than this (None: no bound).
        search_timeout: the seconds a glob or grep may take (default 30; past it
            :class:`~adk.errors.SearchLimitError`).
        max_search_bytes: the most file contents one grep reads (default 64 MiB).

    Example::

        backend = InMemoryBackend({"/notes.txt": "hello"})
        await backend.read("/notes.txt")  # 'hello'
    """

    def __init__(
        self,
        files: dict[str, str] | None = None,
        *,
        max_file_bytes: int | None = None,
        search_timeout: float = 30.0,
        max_search_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.max_file_bytes = max_file_bytes
        self._set_search_bounds(search_timeout, max_search_bytes)
        self._data: dict[str, tuple[str, str]] = {}
        for path, content in (files or {}).items():
            self._write(path, content)

    def __repr__(self) -> str:
        return f"InMemoryBackend(files={len(self._data)})"

    def _files(self, directory: str) -> list[tuple[str, int, str]]:
        return [
            (path, len(content.encode("utf-8", "surrogatepass")), modified)
            for path, (content, modified) in self._data.items()
            if under(path, directory)
        ]

    def _load(self, path: str, *, strict: bool = False) -> str:
        entry = self._data.get(path)
        if entry is None:
            raise BackendFileNotFoundError(path)
        return entry[0]

    def _save(self, path: str, content: str) -> None:
        # as on a disk: a file is not a directory (LocalBackend gives the same errors)
        parent = path
        while parent != "/":
            parent = parent.rsplit("/", 1)[0] or "/"
            if parent in self._data:
                raise FilesystemError(not_a_directory(path, parent), path)
        if path not in self._data and any(p.startswith(path + "/") for p in self._data):
            raise FilesystemError(is_a_directory(path), path)
        self._data[path] = (content, datetime.now(UTC).isoformat())

    def _remove(self, path: str) -> None:
        self._data.pop(path, None)
