"""Errors of retrieval components (document loaders)."""

from __future__ import annotations

from compose.errors._base import ComposeError

__all__ = ["LoaderError", "PathOutsideRootError"]


class LoaderError(ComposeError):
    """Raised by a loader that cannot read a source: missing, not a file, not decodable, a bad URI."""


class PathOutsideRootError(LoaderError, PermissionError):
    """Raised by a FileLoader for a source outside its root: an absolute path, a ``..`` component, or a symlink
    that resolves outside the root. ``.uri`` is the source asked for."""

    def __init__(self, uri: str, root: str) -> None:
        super().__init__(f"source {uri!r} is outside the loader's root directory {root!r}")
        self.uri = uri
        self.root = root
