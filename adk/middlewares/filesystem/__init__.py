"""The filesystem a deep agent works on (Eino's ``adk/filesystem`` and ``adk/middlewares/filesystem``).

* :class:`Backend`: the protocol (``ls``, ``read``, ``write``, ``edit``, ``glob``, ``grep``, ``delete``) over a
  virtual file system whose root is ``/``;
* :class:`InMemoryBackend` (files in a dict) and :class:`LocalBackend` (files under a directory, every path
  kept inside it): the same outputs for the same calls;
* :class:`FilesystemMiddleware`: Eino's tools on a backend, ``execute`` on a :class:`Shell`
  (:class:`LocalShell`: opt-in, no sandbox), opt-in large-result offloading.
"""

from adk.middlewares.filesystem._vfs import FileInfo, GrepMatch
from adk.middlewares.filesystem.backend import Backend, GrepOptions, TreeBackend
from adk.middlewares.filesystem.local import LocalBackend
from adk.middlewares.filesystem.memory import InMemoryBackend
from adk.middlewares.filesystem.middleware import FilesystemMiddleware, large_result_pointer
from adk.middlewares.filesystem.shell import LocalShell
from adk.middlewares.filesystem.tools import (
    NO_FILES_FOUND,
    NO_MATCHES_FOUND,
    ExecuteResponse,
    Shell,
    execute_tool,
    filesystem_tools,
    format_line_numbers,
)

__all__ = [
    "NO_FILES_FOUND",
    "NO_MATCHES_FOUND",
    "Backend",
    "ExecuteResponse",
    "FileInfo",
    "FilesystemMiddleware",
    "GrepMatch",
    "GrepOptions",
    "InMemoryBackend",
    "LocalBackend",
    "LocalShell",
    "Shell",
    "TreeBackend",
    "execute_tool",
    "filesystem_tools",
    "format_line_numbers",
    "large_result_pointer",
]
