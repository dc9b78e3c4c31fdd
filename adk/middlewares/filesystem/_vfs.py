"""The virtual file system both backends present (Eino's ``backend_inmemory.go`` semantics), as pure functions:
path normalization, line slicing, ``ls`` from a list of files, doublestar glob matching, grep and edit.

Paths are virtual: ``/`` is the backend's root. ``normalize`` makes every path absolute and clean (``notes.txt``
and ``//notes.txt`` are ``/notes.txt``; ``/a/../b`` is ``/b``) and refuses what no backend may take: a ``..``
climbing above the root, a NUL byte, a path longer than :data:`MAX_PATH_CHARS` or a part longer than
:data:`MAX_NAME_BYTES` bytes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from adk.errors import EditError, GrepPatternError, UnsafePathError

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "FileInfo",
    "GrepMatch",
    "apply_edit",
    "glob_files",
    "glob_match",
    "grep_files",
    "is_a_directory",
    "ls_files",
    "normalize",
    "not_a_directory",
    "slice_lines",
    "under",
]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255


@dataclass(frozen=True, slots=True)
class FileInfo:
    """An entry of ``ls`` or ``glob`` (Eino's ``FileInfo``).

    Attributes:
        path: for ``ls`` the entry's name; for ``glob`` the path relative to the search directory, or absolute
            for an absolute pattern.
        is_dir: a directory.
        size: the file's size in bytes (0 for a directory).
        modified_at: the last modification, ISO 8601.
    """

    path: str
    is_dir: bool = False
    size: int = 0
    modified_at: str = ""


@dataclass(frozen=True, slots=True)
class GrepMatch:
    """One matching (or context) line: its file's virtual path, 1-based line number and text."""

    path: str
    line: int
    content: str


def normalize(path: str) -> str:
    """The clean absolute virtual path of ``path`` (``""`` is ``/``).

    Raises:
        UnsafePathError: a NUL byte, a ``..`` above the root, or a path or part that is too long.
    """
    if "\x00" in path:
        raise UnsafePathError(path, "it contains a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise UnsafePathError(path[:64] + "...", f"it is longer than {MAX_PATH_CHARS} characters")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise UnsafePathError(path, "'..' climbs above the root")
            parts.pop()
            continue
        if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise UnsafePathError(path[:64] + "...", f"a part of it is longer than {MAX_NAME_BYTES} bytes")
        parts.append(part)
    return "/" + "/".join(parts)


def not_a_directory(path: str, parent: str) -> str:
    """The error text of a write below a file."""
    return f"cannot write {path}: {parent} is a file"


def is_a_directory(path: str) -> str:
    """The error text of a write to a directory's path."""
    return f"cannot write {path}: it is a directory"


def under(file_path: str, directory: str) -> bool:
    """Is the normalized ``file_path`` ``directory`` itself or inside it?"""
    return directory == "/" or file_path == directory or file_path.startswith(directory + "/")


def slice_lines(content: str, offset: int, limit: int) -> str:
    """Lines ``offset`` (1-based; below 1 is 1) to ``offset + limit - 1`` of ``content`` (``limit <= 0``: to the
    end), without the last line's newline; ``""`` past the end (Eino's ``InMemoryBackend.Read``)."""
    skip = max(offset - 1, 0)
    if skip == 0 and (limit <= 0 or content.count("\n") + 1 <= limit):
        return content
    start = 0
    for _ in range(skip):
        idx = content.find("\n", start)
        if idx == -1:
            return ""
        start = idx + 1
    if limit <= 0:
        return content[start:]
    end = start
    for _ in range(limit):
        idx = content.find("\n", end)
        if idx == -1:
            return content[start:]
        end = idx + 1
    return content[start : end - 1]


def ls_files(directory: str, files: Iterable[tuple[str, int, str]]) -> list[FileInfo]:
    """The immediate children of ``directory`` among ``files`` (``(path, size, modified_at)``, normalized
    paths): files by name, directories (that hold a file) by name, sorted by name; a file's own path lists
    the file."""
    found: dict[str, FileInfo] = {}
    for path, size, modified in files:
        if not under(path, directory):
            continue
        rel = path[len(directory) :].lstrip("/") if directory != "/" else path.lstrip("/")
        if not rel:
            found.setdefault(path, FileInfo(posixpath.basename(path), False, size, modified))
            continue
        name, sep, _ = rel.partition("/")
        child = (directory.rstrip("/") + "/" + name) if directory != "/" else "/" + name
        if not sep:
            found.setdefault(child, FileInfo(name, False, size, modified))
            continue
        seen = found.get(child)
        if seen is None or (seen.is_dir and modified > seen.modified_at):
            found[child] = FileInfo(name, True, 0, modified)
    return sorted(found.values(), key=lambda info: info.path)


# --- glob (doublestar: `*` within a part, `**` across parts, `?`, `[...]`, `{a,b}`) ---


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(_translate(pattern, 0, len(pattern))[0] + r"\Z", re.DOTALL)
    except (ValueError, re.error) as exc:
        raise GrepPatternError(f"invalid glob pattern: {pattern!r}: {exc}") from exc


def _translate(p: str, i: int, end: int, *, in_brace: bool = False) -> tuple[str, int]:
    out: list[str] = []
    while i < end:
        c = p[i]
        if c == "*":
            if p.startswith("**", i) and (i == 0 or p[i - 1] == "/") and (i + 2 == end or p[i + 2] == "/"):
                if i + 2 == end:
                    out.append(".*")
                    i += 2
                else:
                    out.append("(?:.*/)?")
                    i += 3
                continue
            while i < end and p[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            close = p.find("]", i + 2 if i + 1 < end and p[i + 1] in "!^" else i + 1)
            if close == -1:
                raise ValueError("unclosed '['")
            body = p[i + 1 : close]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[^/{body}]" if negate else f"(?!/)[{body}]")
            i = close
        elif c == "{":
            alternatives: list[str] = []
            i += 1
            while True:
                alt, i = _translate(p, i, end, in_brace=True)
                alternatives.append(alt)
                if i >= end:
                    raise ValueError("unclosed '{'")
                if p[i] == "}":
                    break
                i += 1  # the ','
            out.append("(?:" + "|".join(alternatives) + ")")
        elif in_brace and c in ",}":
            return "".join(out), i
        elif c == "\\" and i + 1 < end:
            i += 1
            out.append(re.escape(p[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out), i


def glob_match(pattern: str, name: str) -> bool:
    """Does ``name`` match the doublestar ``pattern``?

    Raises:
        GrepPatternError: the pattern is malformed.
    """
    return _glob_regex(pattern).match(name) is not None


def glob_files(pattern: str, directory: str, files: Iterable[tuple[str, int, str]]) -> list[FileInfo]:
    """The files matching ``pattern``: an absolute pattern matches whole paths (listed absolute), another
    one the paths under ``directory`` relative to it (listed relative). Sorted by path."""
    absolute = pattern.startswith("/")
    out: list[FileInfo] = []
    for path, size, modified in files:
        if absolute:
            name = path
        elif not under(path, directory):
            continue
        else:
            name = path.lstrip("/") if directory == "/" else path[len(directory) + 1 :]
        if glob_match(pattern, name):
            out.append(FileInfo(name, False, size, modified))
    return sorted(out, key=lambda info: info.path)


# --- grep ---

_FILE_TYPES: dict[str, tuple[str, ...]] = {
    "c": ("c", "h", "H", "cats"),
    "cpp": ("C", "cc", "cpp", "cxx", "c++", "h", "hh", "hpp", "hxx", "h++", "inl"),
    "cs": ("cs",),
    "csharp": ("cs",),
    "css": ("css", "scss", "sass", "less"),
    "csv": ("csv",),
    "go": ("go",),
    "html": ("ejs", "htm", "html"),
    "java": ("java", "jsp", "jspx", "properties"),
    "js": ("cjs", "js", "jsx", "mjs", "vue"),
    "json": ("json", "sarif"),
    "jsonl": ("jsonl",),
    "kotlin": ("kt", "kts"),
    "lua": ("lua",),
    "make": ("mak", "mk"),
    "markdown": ("markdown", "md", "mdown", "mdwn", "mdx", "mkd", "mkdn"),
    "md": ("markdown", "md", "mdown", "mdwn", "mdx", "mkd", "mkdn"),
    "php": ("php", "php3", "php4", "php5", "php7", "php8", "pht", "phtml"),
    "py": ("py", "pyi"),
    "python": ("py", "pyi"),
    "ruby": ("gemspec", "rb", "rbw"),
    "rust": ("rs",),
    "scala": ("sbt", "scala"),
    "sh": ("bash", "sh", "zsh"),
    "sql": ("psql", "sql"),
    "swift": ("swift",),
    "toml": ("toml",),
    "ts": ("cts", "mts", "ts", "tsx"),
    "typescript": ("cts", "mts", "ts", "tsx"),
    "txt": ("txt",),
    "xml": ("dtd", "xml", "xsd", "xsl", "xslt"),
    "yaml": ("yaml", "yml"),
}


def _type_matches(path: str, file_type: str) -> bool:
    ext = posixpath.splitext(path)[1].removeprefix(".")
    return ext in _FILE_TYPES.get(file_type, ()) or ext == file_type


def grep_candidates(paths: Iterable[str], directory: str, glob: str, file_type: str) -> list[str]:
    """The files grep searches: under ``directory``, matching ``glob`` (against the path relative to
    ``directory`` when it has a ``/`` or ``**``, else the file name) and ``file_type``; sorted."""
    out: list[str] = []
    deep = "/" in glob or "**" in glob
    for path in sorted(paths):
        if not under(path, directory):
            continue
        if glob:
            if deep:
                name = path.lstrip("/") if directory == "/" else path[len(directory) :].lstrip("/")
            else:
                name = posixpath.basename(path)
            if not glob_match(glob, name):
                continue
        if file_type and not _type_matches(path, file_type):
            continue
        out.append(path)
    return out


def compile_pattern(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    """The grep regex.

    Raises:
        GrepPatternError: empty or invalid.
    """
    if not pattern:
        raise GrepPatternError("pattern cannot be empty")
    try:
        return re.compile(pattern, re.IGNORECASE if case_insensitive else 0)
    except re.error as exc:
        raise GrepPatternError(f"invalid regex pattern: {exc}") from exc


def grep_files(
    files: Iterable[tuple[str, str]],
    regex: re.Pattern[str],
    *,
    multiline: bool = False,
    before: int = 0,
    after: int = 0,
) -> list[GrepMatch]:
    """The matching lines of ``files`` (``(path, content)``, in order): each line the regex finds something in,
    or (``multiline``) every line a match of the whole content spans; with ``before``/``after`` the context
    lines around each match too, each line once (Eino's ``applyContext``)."""
    out: list[GrepMatch] = []
    for path, content in files:
        lines = content.split("\n")
        found: list[int] = []
        if multiline:
            for m in regex.finditer(content):
                first = content.count("\n", 0, m.start()) + 1
                last = content.count("\n", 0, m.end()) + 1
                found.extend(range(first, min(last, len(lines)) + 1))
        else:
            found = [n for n, line in enumerate(lines, 1) if regex.search(line)]
        if before > 0 or after > 0:
            shown: set[int] = set()
            for n in found:
                for k in range(max(n - before, 1), min(n + after, len(lines)) + 1):
                    if k not in shown:
                        shown.add(k)
                        out.append(GrepMatch(path, k, lines[k - 1]))
        else:
            out.extend(GrepMatch(path, n, lines[n - 1]) for n in found)
    return out


def apply_edit(content: str, path: str, old: str, new: str, replace_all: bool) -> str:
    """``content`` with ``old`` replaced by ``new`` (Eino's ``Edit`` checks and messages).

    Raises:
        EditError: ``old`` is empty, not found, or found more than once without ``replace_all``.
    """
    if not old:
        raise EditError("oldString must be non-empty", path)
    first = content.find(old)
    if first == -1:
        raise EditError(f"oldString not found in file: {path}", path)
    if replace_all:
        return content.replace(old, new)
    if content.find(old, first + len(old)) != -1:
        raise EditError(f"multiple occurrences of oldString found in file {path}, but ReplaceAll is false", path)
    return content[:first] + new + content[first + len(old) :]


def sort_by_base_name(matches: Sequence[GrepMatch]) -> list[GrepMatch]:
    """Stable sort by the file's base name (what Eino's grep tool does before formatting)."""
    return sorted(matches, key=lambda m: posixpath.basename(m.path))
