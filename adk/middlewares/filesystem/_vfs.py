"""The virtual file system both backends present (Eino's ``backend_inmemory.go`` semantics), as pure functions:
path normalization, line slicing, ``ls`` from a list of files, doublestar glob matching, grep and edit.

Paths are virtual: ``/`` is the backend's root. ``normalize`` makes every path absolute and clean (``notes.txt``
and ``//notes.txt`` are ``/notes.txt``; ``/a/../b`` is ``/b``) and refuses what no backend may take: a ``..``
climbing above the root, a NUL byte or another control character (a newline would make up entries in the
listings), a path longer than :data:`MAX_PATH_CHARS` or a part longer than :data:`MAX_NAME_BYTES` bytes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adk.errors import EditError, GrepPatternError, UnsafePathError
from adk.middlewares.filesystem._glob import compile_glob

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "FileInfo",
    "GrepMatch",
    "apply_edit",
    "compile_pattern",
    "glob_files",
    "grep_candidates",
    "grep_results",
    "has_control_character",
    "is_a_directory",
    "ls_files",
    "normalize",
    "not_a_directory",
    "slice_lines",
    "under",
]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _no_check() -> None:
    pass


def has_control_character(name: str) -> bool:
    """Does ``name`` hold a control character (which ``normalize`` refuses)?"""
    return _CONTROL.search(name) is not None


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
        UnsafePathError: a NUL byte or another control character, a ``..`` above the root, or a path or part
            that is too long.
    """
    if "\x00" in path:
        raise UnsafePathError(path, "it contains a NUL byte")
    bad = _CONTROL.search(path)
    if bad is not None:  # a newline would make up entries in the listings, one name a line
        raise UnsafePathError(path, f"it contains a control character (U+{ord(bad.group()):04X})")
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


# --- glob (doublestar: see _glob) and grep, each bounded by a caller's `check` between entries ---


def glob_files(
    pattern: str, directory: str, files: Iterable[tuple[str, int, str]], check: Callable[[], None] = _no_check
) -> list[FileInfo]:
    """The files matching ``pattern``: an absolute pattern matches whole paths (listed absolute), another
    one the paths under ``directory`` relative to it (listed relative). Sorted by path. ``check`` is called
    before each file (it raises to stop the search)."""
    absolute = pattern.startswith("/")
    glob = compile_glob(pattern)
    out: list[FileInfo] = []
    for path, size, modified in files:
        check()
        if absolute:
            name = path
        elif not under(path, directory):
            continue
        else:
            name = path.lstrip("/") if directory == "/" else path[len(directory) + 1 :]
        if glob.match(name):
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


def grep_candidates(
    paths: Iterable[str], directory: str, glob: str, file_type: str, check: Callable[[], None] = _no_check
) -> list[str]:
    """The files grep searches: under ``directory``, matching ``glob`` (against the path relative to
    ``directory`` when it has a ``/`` or ``**``, else the file name) and ``file_type``; sorted. ``check`` is
    called before each file."""
    out: list[str] = []
    deep = "/" in glob or "**" in glob
    matcher = compile_glob(glob) if glob else None
    for path in sorted(paths):
        check()
        if not under(path, directory):
            continue
        if matcher is not None:
            if deep:
                name = path.lstrip("/") if directory == "/" else path[len(directory) :].lstrip("/")
            else:
                name = posixpath.basename(path)
            if not matcher.match(name):
                continue
        if file_type and not _type_matches(path, file_type):
            continue
        out.append(path)
    return out


_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def _end_of_text(pattern: str) -> str:
    """``pattern`` with each ``$`` where multi-line mode is off made ``\\Z``: in Go's RE2 (Eino's grep) ``$`` is
    the end of the text unless ``(?m)``, where Python's ``$`` also matches before a last newline."""
    out: list[str] = []
    multiline = False
    outer: list[bool] = []  # the mode outside each open group
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":  # a class, copied whole: '$' and '(' in it are literal
            j = i + 1
            j += pattern.startswith("^", j)
            j += pattern.startswith("]", j)
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i : j + 1])
            i = j + 1
            continue
        if c == "(":
            flags = _FLAGS.match(pattern, i)
            if flags is not None and flags.group(3) == ")":  # (?m) or (?-m): the rest of the enclosing group
                multiline = ("m" in flags.group(1) or multiline) and "m" not in (flags.group(2) or "")
            else:
                outer.append(multiline)
                if flags is not None:  # (?m:...) or (?-m:...)
                    multiline = ("m" in flags.group(1) or multiline) and "m" not in (flags.group(2) or "")
        elif c == ")" and outer:
            multiline = outer.pop()
        out.append("\\Z" if c == "$" and not multiline else c)
        i += 1
    return "".join(out)


def compile_pattern(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    """The grep regex, with ``$`` meaning the end of the text unless ``(?m)`` (as in Eino's Go regexp).

    Raises:
        GrepPatternError: empty or invalid.
    """
    if not pattern:
        raise GrepPatternError("pattern cannot be empty")
    flags = re.IGNORECASE if case_insensitive else 0
    try:
        re.compile(pattern, flags)  # its errors point into the pattern as given
        return re.compile(_end_of_text(pattern), flags)
    except re.error as exc:
        raise GrepPatternError(f"invalid regex pattern: {exc}") from exc


def grep_results(
    files: Sequence[tuple[str, str]],
    found: Sequence[Sequence[int]],
    before: int = 0,
    after: int = 0,
    check: Callable[[], None] = _no_check,
) -> list[GrepMatch]:
    """The matches of ``files`` (``(path, content)``, in order) given ``found``, the numbers of each file's
    matching lines (``_grep_worker``); with ``before``/``after`` the context lines around each match too, each
    line once (Eino's ``applyContext``). ``check`` is called before each file."""
    out: list[GrepMatch] = []
    for (path, content), numbers in zip(files, found, strict=True):
        check()
        if not numbers:
            continue
        lines = content.split("\n")
        if before > 0 or after > 0:
            shown: set[int] = set()
            for n in numbers:
                for k in range(max(n - before, 1), min(n + after, len(lines)) + 1):
                    if k not in shown:
                        shown.add(k)
                        out.append(GrepMatch(path, k, lines[k - 1]))
        else:
            out.extend(GrepMatch(path, n, lines[n - 1]) for n in numbers)
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
