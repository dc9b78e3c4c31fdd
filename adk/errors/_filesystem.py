"""Errors of the filesystem backends (``adk.middlewares.filesystem``)."""

from __future__ import annotations

from adk.errors._base import AgentError

__all__ = [
    "BackendFileNotFoundError",
    "EditError",
    "FileTooLargeError",
    "FilesystemError",
    "GrepPatternError",
    "SearchLimitError",
    "UnsafePathError",
]


class FilesystemError(AgentError):
    """A filesystem backend (``adk.middlewares.filesystem``) refused or failed an operation on ``path`` (a
    virtual path, never a host path)."""

    reason = "filesystem"

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class UnsafePathError(FilesystemError, ValueError):
    """A path the backend refuses: ``..`` climbing above the root, a NUL byte, too long, or (``LocalBackend``)
    resolving through a symlink to outside the root. ``problem`` says which."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"unsafe path {path!r}: {problem}", path)
        self.problem = problem


class BackendFileNotFoundError(FilesystemError, FileNotFoundError):
    """No file at the path (Eino's "file not found: /path")."""

    def __init__(self, path: str) -> None:
        super().__init__(f"file not found: {path}", path)


class FileTooLargeError(FilesystemError):
    """A file (or a write's content) is over the backend's size bound: ``size`` and ``limit`` in bytes."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"file {path} is too large: {size} bytes, the limit is {limit} bytes", path)
        self.size = size
        self.limit = limit


class EditError(FilesystemError, ValueError):
    """An ``edit`` that cannot apply: ``old_string`` empty, not found, or found more than once without
    ``replace_all`` (Eino's messages), or a file that is not UTF-8 text (rewriting it would lose its bytes)."""


class GrepPatternError(FilesystemError, ValueError):
    """A grep regular expression or a glob pattern that does not compile, or a glob too big to match."""


class SearchLimitError(FilesystemError):
    """A ``glob`` or ``grep`` stopped at one of its backend's bounds (``search_timeout`` seconds, or
    ``max_search_bytes`` of file contents to search): ``operation`` is ``"glob"`` or ``"grep"``, ``pattern`` the
    pattern, ``path`` the directory searched."""

    def __init__(self, operation: str, pattern: str, path: str, problem: str) -> None:
        shown = pattern if len(pattern) <= 100 else pattern[:100] + "..."
        super().__init__(
            f"{operation} {shown!r} in {path} stopped: {problem}; narrow the search (path, glob, type) or "
            "simplify the pattern",
            path,
        )
        self.operation = operation
        self.pattern = pattern
