"""``FileLoader``: reads text files under one root directory, and never outside it."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

import anyio.to_thread

from compose.components.document import Document, Source
from compose.errors import LoaderError, PathOutsideRootError

__all__ = ["FileLoader"]


class FileLoader:
    """A :class:`~compose.components.Loader` reading ``Source(uri)`` as the text file ``root / uri``.

    ``uri`` is a relative path with ``/`` separators. An absolute path, a ``..`` component, or a path whose
    symlinks resolve outside ``root`` raises :class:`~compose.errors.PathOutsideRootError` (a
    ``PermissionError``) before anything is opened; a missing file, a directory or undecodable text raise
    :class:`~compose.errors.LoaderError`. The file read is the resolved path that was checked. (A symlink
    swapped in between the check and the open is not guarded against: do not point a loader at a directory
    that untrusted writers can change.)

    The document's id is the normalised ``uri``; its ``meta_data`` holds ``_source`` (the uri), ``_file_name``
    and ``_extension`` (as Eino-ext's file loader). The per-call option ``encoding`` overrides the
    constructor's. Files are read in a worker thread.

    Example:
        >>> import anyio, tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (root / "a.txt").write_text("hello")
        >>> [doc] = anyio.run(FileLoader(root).load, Source("a.txt"))
        >>> doc.id, doc.content, doc.meta_data["_extension"]
        ('a.txt', 'hello', '.txt')
    """

    def __init__(self, root: str | os.PathLike[str], *, encoding: str = "utf-8") -> None:
        self.root = Path(root).resolve(strict=True)
        if not self.root.is_dir():
            raise NotADirectoryError(f"FileLoader root {str(root)!r} is not a directory")
        self.encoding = encoding

    def __repr__(self) -> str:
        return f"FileLoader(root={str(self.root)!r}, encoding={self.encoding!r})"

    async def load(self, source: Source, **opts: Any) -> list[Document]:
        """The one document the file ``source.uri`` holds."""
        unknown = set(opts) - {"encoding"}
        if unknown:
            raise TypeError(f"unknown loader option(s) {sorted(unknown)}; expected some of ['encoding']")
        encoding = opts.get("encoding") or self.encoding
        uri = source.uri if isinstance(source, Source) else None
        if not isinstance(uri, str):
            raise LoaderError(f"FileLoader.load takes a Source, got {type(source).__qualname__}")
        rel = self.check(uri)
        path = self.root / rel
        text = await anyio.to_thread.run_sync(self._read, uri, path, encoding)
        name = PurePosixPath(rel).name
        meta = {"_source": uri, "_file_name": name, "_extension": PurePosixPath(name).suffix}
        return [Document(id=rel, content=text, meta_data=meta)]

    def check(self, uri: str) -> str:
        """``uri`` normalised (``a/./b`` -> ``a/b``) if it names a path inside the root; else
        ``PathOutsideRootError`` (or ``LoaderError`` for a URI that is no relative path at all)."""
        if not uri or "\x00" in uri or "://" in uri:
            raise LoaderError(f"source {uri!r} is not a relative file path")
        posix = PurePosixPath(uri.replace("\\", "/"))
        if posix.is_absolute() or Path(uri).is_absolute() or Path(uri).drive or ".." in posix.parts:
            raise PathOutsideRootError(uri, str(self.root))
        parts = [p for p in posix.parts if p != "."]
        if not parts:
            raise LoaderError(f"source {uri!r} names the root directory, not a file")
        return "/".join(parts)

    def _read(self, uri: str, path: Path, encoding: str) -> str:
        try:
            real = path.resolve(strict=True)
        except FileNotFoundError as exc:
            raise LoaderError(f"source {uri!r}: no such file under {str(self.root)!r}") from exc
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (before Python 3.13)
            raise LoaderError(f"source {uri!r} cannot be resolved: {exc}") from exc
        if not real.is_relative_to(self.root):
            raise PathOutsideRootError(uri, str(self.root))
        if not real.is_file():
            raise LoaderError(f"source {uri!r} is not a regular file")
        try:
            return real.read_text(encoding=encoding)
        except UnicodeDecodeError as exc:
            raise LoaderError(f"source {uri!r} is not {encoding} text: {exc}") from exc
        except OSError as exc:
            raise LoaderError(f"source {uri!r} cannot be read: {exc}") from exc
