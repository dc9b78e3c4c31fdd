#!/usr/bin/env python3
"""Regroup ``compose/`` and ``adk/`` into sub-packages that show the design (STYLE.md, Layout).

A dev tool, not shipped. Run it from the repository root, on a tree where everyone's work is merged::

    python tools/regroup.py --dry-run     # the plan: moves, new packages, the files whose references change
    python tools/regroup.py               # do it (git mv, rewrite, ruff), then commit the result

What it does, in order (each step checks the tree first, so a second run changes nothing):

1. ``git mv`` each module of :data:`MOVES` to its new place, creating the packages of :data:`PACKAGES`, each
   with an ``__init__.py`` written from its docstring and the ``__all__`` of its public modules (re-exported,
   sorted the way ruff's RUF022 sorts); new packages are added to ``[tool.setuptools] packages``.
2. Rewrite every reference in the tracked (and untracked, not ignored) text files: ``from old import names``
   (each name from the module that now defines it; a module that became the head of its package, e.g.
   ``compose.graph``, keeps ``from compose.graph import Graph`` outside the library for the names its package
   exports, while the library itself imports from the defining submodule, so that no module imports its own
   half-initialised package), ``import old``, ``old.attr`` and any other dotted use (docstrings, monkeypatch and
   importlib targets, ``-m`` invocations, strings of code), and file paths such as ``compose/tool_node.py``.
3. ``ruff check --fix --select I`` on the changed Python files, then ``ruff check`` on them: what is left is
   printed (a line grown past 120 characters, say), as is every remaining mention of an old module or of a
   bare old file name (``tool_node.py``) for a human to look at.
4. Import every moved module and new package in a fresh interpreter (a circular import shows here);
   ``--no-check-imports`` skips it.

It exits with 1 when ruff or the import check reported something (the changes are made: fix, then commit).
Files it does not know (new since this table was written) are rewritten like the others; a module that gained
or lost names is read as it is now. Nothing outside the repository is touched.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import io
import os
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Sequence
from pathlib import Path

# ------------------------------------------------------------------------------------------------------------
# The table

#: old dotted module -> new dotted module
MOVES: dict[str, str] = {
    # compose.graph: building graphs (the builder, branches, the chain and workflow front ends, field mapping,
    # compile-time info). The old ``compose.graph`` is the head of its package.
    "compose.graph": "compose.graph.builder",
    "compose.branch": "compose.graph.branch",
    "compose.chain": "compose.graph.chain",
    "compose.workflow": "compose.graph.workflow",
    "compose._field_mapping": "compose.graph._field_mapping",
    "compose.graph_info": "compose.graph.info",
    # compose.tools: what a model calls (protocols, @tool), how a graph calls it (ToolsNode), and what wraps
    # each call (tool middlewares). The old ``compose.tools`` is the head of its package.
    "compose.tools": "compose.tools.base",
    "compose.tool_node": "compose.tools.node",
    "compose.tool_middleware": "compose.tools.middleware",
    # adk.chat_model: ChatModelAgent and everything only it uses (the ReAct graph and its run, the model chain,
    # instruction, structured output, retry, failover, the approval guard, tool-generated actions).
    "adk.chat_model_agent": "adk.chat_model.agent",
    "adk.react": "adk.chat_model.react",
    "adk._react_run": "adk.chat_model._react_run",
    "adk._model": "adk.chat_model._model",
    "adk._tools_nodes": "adk.chat_model._tools_nodes",
    "adk.actions": "adk.chat_model.actions",
    "adk.approval": "adk.chat_model.approval",
    "adk.failover": "adk.chat_model.failover",
    "adk.instruction": "adk.chat_model.instruction",
    "adk.retry": "adk.chat_model.retry",
    "adk.structured_output": "adk.chat_model.structured_output",
}


@dataclasses.dataclass(frozen=True)
class Package:
    """A package the regrouping creates: its docstring and the modules whose ``__all__`` it re-exports."""

    doc: str
    exports: tuple[str, ...]


PACKAGES: dict[str, Package] = {
    "compose.graph": Package(
        doc='''Building graphs: the ``Graph`` builder and the two front ends on it, ``Chain`` and ``Workflow``.

- ``builder``: :class:`Graph` (nodes, edges, branches, build-time checks, ``compile()``), ``START``, ``END``;
- ``branch``: the routing a node's output decides (:class:`GraphBranch`, :class:`StreamGraphBranch` and their
  multi-target variants);
- ``chain``: :class:`Chain`, a graph built by appending nodes, with ``Parallel`` and ``ChainBranch`` steps;
- ``workflow``: :class:`Workflow`, a graph whose edges map fields (``_field_mapping``: :class:`FieldMapping`,
  ``map_fields`` and the paths they read and write);
- ``info``: what a compiled graph looks like (:class:`GraphInfo`, its nodes and branches, Mermaid), handed to
  compile callbacks.

Compiling and running are the engine's (``compose._engine``); the result is a :class:`~compose.runnable.Runnable`.
''',
        exports=(
            "compose.graph.builder",
            "compose.graph.branch",
            "compose.graph.chain",
            "compose.graph.workflow",
            "compose.graph._field_mapping",
            "compose.graph.info",
        ),
    ),
    "compose.tools": Package(
        doc='''Tools: what a chat model can call, and the graph node that calls them.

- ``base``: the tool protocols (:class:`BaseTool`, :class:`InvokableTool`, :class:`StreamableTool`) and
  :func:`tool`, which builds one from a typed function (:class:`FunctionTool`, :class:`StreamingFunctionTool`);
- ``node``: :class:`ToolsNode`, which runs a message's tool calls (in parallel or in order) and answers with
  one tool message per call, in call order;
- ``middleware``: what wraps each call's endpoints (:class:`ToolMiddleware`, the :class:`ToolInput` /
  :class:`ToolOutput` records, :func:`tool_errors_as_results`) and :func:`get_tool_call_id`.
''',
        exports=("compose.tools.base", "compose.tools.node", "compose.tools.middleware"),
    ),
    "adk.chat_model": Package(
        doc='''``ChatModelAgent``: a chat model and tools on the ReAct graph, and everything only it uses.

- ``agent``: :class:`ChatModelAgent` and its :class:`ToolsConfig`;
- ``react``: the ReAct graph (model -> tools -> model, return-directly tools, output checks) and its
  :class:`State`; ``_react_run``: one run of it, its events as they happen;
- ``_model``: the chain around the user's model (options, ``retry``, ``failover``, the event emitter);
- ``instruction``: the instruction's ``{key}`` placeholders and the transfer-to-agent texts;
- ``structured_output``: ``output_type=`` answers, validated;
- ``approval``: the approval guard (``approval=``), a tool call waiting for a decision;
- ``actions``: :func:`send_tool_gen_action`, a tool's action on its own event.

The agent protocol, the runner and events are ``adk``'s (``adk.agent``, ``adk.runner``, ``adk.events``).
''',
        exports=(
            "adk.chat_model.agent",
            "adk.chat_model.react",
            "adk.chat_model.actions",
            "adk.chat_model.approval",
            "adk.chat_model.failover",
            "adk.chat_model.instruction",
            "adk.chat_model.retry",
            "adk.chat_model.structured_output",
        ),
    ),
}

#: files the rewrite leaves alone (this tool and its notes name the old modules on purpose)
EXCLUDED = frozenset({"tools/regroup.py", "tests/test_regroup.py"})
#: the text files whose references are rewritten (js/html/css only hold a module path by accident)
TEXT_SUFFIXES = frozenset({".py", ".pyi", ".md", ".rst", ".toml", ".cfg", ".ini", ".yml", ".yaml", ".txt", ".sh"})
TEXT_SUFFIXES_IF_MENTIONED = frozenset({".js", ".mjs", ".html", ".css", ".json"})
LINE_LENGTH = 120


# ------------------------------------------------------------------------------------------------------------
# The model of the tree


def module_path(module: str) -> Path:
    return Path(*module.split(".")).with_suffix(".py")


def package_init(package: str) -> Path:
    return Path(*package.split(".")) / "__init__.py"


@dataclasses.dataclass
class Names:
    """What one module defines (def, class, assignment at top level) and exports (``__all__``)."""

    defined: set[str]
    exported: list[str]


def read_names(source: str) -> Names:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return Names(set(), [])
    defined: set[str] = set()
    exported: list[str] = []

    def targets(node: ast.expr) -> Iterable[str]:
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Tuple | ast.List):
            for elt in node.elts:
                yield from targets(elt)

    def visit(body: Sequence[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    defined.update(targets(t))
                is_all = any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                if is_all and isinstance(node.value, ast.List | ast.Tuple):
                    exported[:] = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
            elif isinstance(node, ast.AnnAssign):
                defined.update(targets(node.target))
            elif sys.version_info >= (3, 12) and isinstance(node, ast.TypeAlias):
                defined.update(targets(node.name))
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                if isinstance(node, ast.Try):
                    for handler in node.handlers:
                        visit(handler.body)
                    visit(node.finalbody)

    visit(tree.body)
    defined.discard("__all__")
    return Names(defined, exported)


class Tree:
    """The repository as the regrouping sees it: where each module is now, and the names it defines."""

    def __init__(self, root: Path, moves: dict[str, str], packages: dict[str, Package]) -> None:
        self.root = root
        self.moves = moves
        self.packages = packages
        # heads: old modules that become the package of their new module (compose.graph -> compose.graph.builder)
        self.heads = {old for old, new in moves.items() if new.rsplit(".", 1)[0] == old}
        self.names: dict[str, Names] = {}
        for new in moves.values():
            path = self.source_of(new)
            self.names[new] = read_names(path.read_text()) if path is not None else Names(set(), [])

    def source_of(self, new: str) -> Path | None:
        """The file of ``new`` now: at its new place, or still at its old one."""
        for module in (new, self.old_of(new)):
            path = self.root / module_path(module)
            if path.is_file():
                return path
        return None

    def old_of(self, new: str) -> str:
        return next(old for old, n in self.moves.items() if n == new)

    def package_exports(self, package: str) -> dict[str, str]:
        """name -> module, for the names ``package``'s ``__init__`` re-exports: those its parts define and export."""
        parts = self.packages[package].exports
        out: dict[str, str] = {}
        for module in parts:
            for name in self.names[module].exported:
                owner = self.defining(name, default=module)
                if owner in parts and name in self.names[owner].defined:  # not a re-export of compose.errors & co
                    out.setdefault(name, owner)
        return out

    def defining(self, name: str, default: str) -> str:
        """The moved module that defines ``name``: ``default`` if it does (or if none does), else one of the
        same package first."""
        if name in self.names[default].defined:
            return default
        package = default.rsplit(".", 1)[0]
        ranked = sorted(self.names, key=lambda m: m.rsplit(".", 1)[0] != package)
        return next((m for m in ranked if name in self.names[m].defined), default)

    def submodules(self, package: str) -> set[str]:
        subs = {new.rsplit(".", 1)[1] for new in self.moves.values() if new.rsplit(".", 1)[0] == package}
        folder = self.root / Path(*package.split("."))
        if folder.is_dir():
            subs.update(p.stem for p in folder.glob("*.py"))
            subs.update(p.name for p in folder.iterdir() if (p / "__init__.py").is_file())
        return subs


# ------------------------------------------------------------------------------------------------------------
# Step 1: moves, packages, pyproject


def git(root: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def plan_moves(tree: Tree) -> tuple[list[tuple[Path, Path]], list[str]]:
    moves: list[tuple[Path, Path]] = []
    notes: list[str] = []
    for old, new in tree.moves.items():
        src, dst = module_path(old), module_path(new)
        has_src, has_dst = (tree.root / src).is_file(), (tree.root / dst).is_file()
        if has_src and has_dst:
            raise SystemExit(f"both {src} and {dst} exist: merge them by hand, then run again")
        if has_src:
            moves.append((src, dst))
        elif not has_dst:
            notes.append(f"{old}: neither {src} nor {dst} exists (the module is gone?); skipped")
    return moves, notes


def sort_key(name: str) -> tuple[int, str]:
    """RUF022's order (and isort's order-by-type): CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def render_init(tree: Tree, package: str) -> str:
    exports = tree.package_exports(package)
    by_module: dict[str, list[str]] = {}
    for name, module in exports.items():
        by_module.setdefault(module, []).append(name)
    lines = [f'"""{tree.packages[package].doc.strip()}\n"""', ""]
    for module in sorted(by_module):
        names = sorted(by_module[module], key=sort_key)
        one = f"from {module} import {', '.join(names)}"
        if len(one) <= LINE_LENGTH:
            lines.append(one)
        else:
            lines += [f"from {module} import (", *(f"    {n}," for n in names), ")"]
    lines += ["", "__all__ = ["]
    lines += [f'    "{n}",' for n in sorted(exports, key=sort_key)]
    lines += ["]", ""]
    return "\n".join(lines)


def ruff_fixed(root: Path, path: Path, source: str, select: str) -> str:
    """``source`` as ``ruff check --fix --select <select>`` leaves it (unchanged when ruff is missing)."""
    try:
        done = subprocess.run(
            ["ruff", "check", "--fix", "--quiet", "--exit-zero", "--select", select, "--stdin-filename", str(path)],
            cwd=root,
            input=source,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return source
    return done.stdout if done.returncode == 0 and done.stdout else source


PACKAGES_LINE = re.compile(r"^packages\s*=\s*\[(?P<items>[^\]]*)\]", re.MULTILINE)


def updated_pyproject(text: str, packages: Iterable[str]) -> str:
    match = PACKAGES_LINE.search(text)
    if match is None:
        raise SystemExit("pyproject.toml: no `packages = [...]` line under [tool.setuptools]")
    listed = re.findall(r'"([^"]+)"', match["items"])
    missing = [p for p in packages if p not in listed]
    if not missing:
        return text
    tops = list(dict.fromkeys(p.split(".")[0] for p in listed))
    def key(p: str) -> tuple[int, str]:
        top = p.split(".")[0]
        return (tops.index(top) if top in tops else len(tops), p)

    merged = sorted({*listed, *missing}, key=key)
    line = "packages = [" + ", ".join(f'"{p}"' for p in merged) + "]"
    return text[: match.start()] + line + text[match.end() :]


# ------------------------------------------------------------------------------------------------------------
# Step 2: references

IDENT = r"[A-Za-z_]\w*"
NAME_ITEM = rf"{IDENT}(?:[ \t]+as[ \t]+{IDENT})?"
FROM_IMPORT = (
    r"(?P<lead>^[ \t]*|(?<=[^\w.\n]))from[ \t]+(?P<mod>{mods})[ \t]+import[ \t]+"
    rf"(?P<names>\((?:[^()#]|#[^\n]*)*\)|\*|{NAME_ITEM}(?:[ \t]*,[ \t]*{NAME_ITEM})*)"
)


def in_library(rel: Path, moves: Iterable[str]) -> bool:
    """Files of the regrouped packages themselves (they import from defining modules, never from a head)."""
    return rel.parts[0] in {m.split(".")[0] for m in moves}


class Rewriter:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        mods = "|".join(re.escape(m) for m in sorted(tree.moves, key=len, reverse=True))
        self.from_import = re.compile(FROM_IMPORT.format(mods=mods), re.MULTILINE)
        plain = [m for m in tree.moves if m not in tree.heads]
        alternatives = "|".join(re.escape(m) for m in sorted(plain, key=len, reverse=True))
        self.dotted = re.compile(rf"(?<![\w.])(?P<mod>{alternatives})(?!\w)") if plain else None
        self.head_attr = (
            re.compile(rf"(?<![\w.])(?P<mod>{'|'.join(re.escape(m) for m in tree.heads)})\.(?P<attr>{IDENT})")
            if tree.heads
            else None
        )
        paths = {module_path(old).as_posix(): module_path(new).as_posix() for old, new in tree.moves.items()}
        self.paths = paths
        self.path_re = re.compile(
            rf"(?<![\w.\-/])(?P<path>{'|'.join(re.escape(p) for p in sorted(paths, key=len, reverse=True))})(?![\w])"
        )
        self.exports = {head: tree.package_exports(head) for head in tree.heads if head in tree.packages}
        self.notes: list[str] = []

    # -- from old import names --------------------------------------------------------------------------------

    def target(self, old: str, name: str, library: bool) -> str:
        new = self.tree.moves[old]
        if old in self.tree.heads and not library and name in self.exports.get(old, {}):
            return old  # the public path of the part: from compose.graph import Graph
        return self.tree.defining(name, default=new)

    def rewrite_from(self, match: re.Match[str], rel: Path) -> str:
        old, names_text = match["mod"], match["names"]
        library = in_library(rel, self.tree.moves)
        if names_text == "*":
            new = old if old in self.tree.heads and not library else self.tree.moves[old]
            return match[0].replace(old, new, 1)
        inner = names_text[1:-1] if names_text.startswith("(") else names_text
        items = [i.strip() for i in re.sub(r"#[^\n]*", "", inner).split(",") if i.strip()]
        groups: dict[str, list[str]] = {}
        for item in items:
            name = item.split()[0]
            groups.setdefault(self.target(old, name, library), []).append(item)
        head = match[0][: match.start("mod") - match.start()]
        if len(groups) == 1:
            (module,) = groups
            return head + module + match[0][match.end("mod") - match.start() :]
        if "#" in inner:
            self.notes.append(f"{rel}: comments inside `from {old} import (...)` were dropped when it was split")
        indent = match["lead"] if match["lead"].strip() == "" else ""
        at_line_start = match.start() == 0 or match.string[match.start() - 1] == "\n" or bool(indent)
        parts = [f"from {module} import {', '.join(names)}" for module, names in groups.items()]
        sep = "\n" + indent if at_line_start else "; "
        return indent + sep.join(parts)

    # -- old.attr, old, file paths -------------------------------------------------------------------------------

    def rewrite_head_attr(self, match: re.Match[str], rel: Path) -> str:
        head, attr = match["mod"], match["attr"]
        package = head  # the head module's new package has the head's name
        if attr in self.tree.submodules(package) or attr in self.exports.get(head, {}):
            return match[0]
        owner = self.tree.defining(attr, default=self.tree.moves[head])
        if attr not in self.tree.names[owner].defined:
            self.notes.append(f"{rel}: `{head}.{attr}` is neither exported by package {head} nor defined in it")
            return match[0]
        return f"{owner}.{attr}"

    def rewrite(self, text: str, rel: Path) -> str:
        text = self.from_import.sub(lambda m: self.rewrite_from(m, rel), text)
        if self.head_attr is not None:
            text = self.head_attr.sub(lambda m: self.rewrite_head_attr(m, rel), text)
        if self.dotted is not None:
            text = self.dotted.sub(lambda m: self.tree.moves[m["mod"]], text)
        return self.path_re.sub(lambda m: self.paths[m["path"]], text)


def prose_lines(source: str) -> tuple[set[int], dict[int, int]]:
    """The (1-based) lines of ``source`` that are prose (a comment line, or a line of a multi-line string that
    starts its line: a docstring, mostly), and the column of each comment that follows code on its line."""
    lines = source.splitlines()
    prose: set[int] = set()
    trailing: dict[int, int] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return prose, trailing
    for tok in tokens:
        (start, col), (end, _) = tok.start, tok.end
        if tok.type == tokenize.COMMENT:
            if lines[start - 1][:col].strip() == "":
                prose.add(start)
            else:
                trailing[start] = col
        elif tok.type == tokenize.STRING and end > start:
            first = {start} if lines[start - 1][:col].strip() == "" else set()
            prose.update(first | set(range(start + 1, end)))
    return prose, trailing


def _wrapped(text: str, cont: str) -> list[str]:
    pieces: list[str] = []
    while len(text) > LINE_LENGTH:
        cut = text.rfind(" ", len(cont) + 1, LINE_LENGTH + 1)
        if cut <= len(cont.rstrip()):
            break
        pieces.append(text[:cut].rstrip())
        text = cont + text[cut + 1 :].lstrip()
    return [*pieces, text]


def wrap_long_prose(source: str, before: str) -> str:
    """Break the comment and docstring lines the rewrite made longer than the line limit (a longer module path)
    at the last space that fits, the rest on a new line indented as the paragraph; a comment after code that
    became too long goes on its own line above the code."""
    lines = source.splitlines(keepends=True)
    prose, trailing = prose_lines(source)
    old = set(before.splitlines())
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        text = line.rstrip("\n")
        end = line[len(text) :]
        if len(text) <= LINE_LENGTH or text in old or (number not in prose and number not in trailing):
            out.append(line)
            continue
        indent = text[: len(text) - len(text.lstrip())]
        if number in trailing:
            code, comment = text[: trailing[number]].rstrip(), text[trailing[number] :]
            out.append("\n".join([*_wrapped(indent + comment, indent + "# "), code]) + end)
            continue
        following = lines[number].rstrip("\n") if number < len(lines) else ""
        follow_indent = following[: len(following) - len(following.lstrip())]
        if text.lstrip().startswith("#"):
            cont = indent + "# "
        elif following.strip() and len(follow_indent) > len(indent) and not following.strip().startswith('"""'):
            cont = follow_indent
        else:
            cont = indent
        out.append("\n".join(_wrapped(text, cont)) + end)
    return "".join(out)


def text_files(root: Path) -> list[Path]:
    listed = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    out: list[Path] = []
    for name in dict.fromkeys(listed):
        if not name or name in EXCLUDED:
            continue
        rel = Path(name)
        if not (root / rel).is_file():
            continue
        if rel.suffix in TEXT_SUFFIXES or rel.suffix in TEXT_SUFFIXES_IF_MENTIONED or rel.parts[0] == ".ci":
            out.append(rel)
    return out


# ------------------------------------------------------------------------------------------------------------
# Step 3 and 4: ruff, leftovers, imports


def leftovers(root: Path, files: Iterable[Path], tree: Tree) -> list[str]:
    """Mentions of an old module or old file name the rewrite could not decide on."""
    plain = [m for m in tree.moves if m not in tree.heads]
    mention = re.compile(rf"(?<![\w.])(?:{'|'.join(re.escape(m) for m in plain)})(?!\w)") if plain else None
    leaves = {old.rsplit(".", 1)[1]: old.rsplit(".", 1)[0] for old in tree.moves if old not in tree.heads}
    files_named = {old.rsplit(".", 1)[1] for old in tree.moves}
    bare_file = re.compile(rf"(?<![\w/.\-])(?:{'|'.join(re.escape(leaf) for leaf in files_named)})\.py\b")
    module_from_pkg = re.compile(
        rf"from[ \t]+(?P<pkg>{'|'.join(sorted({re.escape(p) for p in leaves.values()}))})[ \t]+import[ \t]+"
        rf"(?P<names>[^\n(]*)"
    )
    out: list[str] = []
    for rel in files:
        try:
            lines = (root / rel).read_text().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(lines, 1):
            where = f"{rel}:{number}: {line.strip()[:110]}"
            if mention is not None and mention.search(line):
                out.append(f"old module still named: {where}")
            elif bare_file.search(line):
                out.append(f"old file name (check it is not one of the moved modules): {where}")
            else:
                for m in module_from_pkg.finditer(line):
                    names = {n.strip().split()[0] for n in m["names"].split(",") if n.strip()}
                    if any(leaves.get(n) == m["pkg"] for n in names):
                        out.append(f"old module imported from its package: {where}")
    return out


def run_ruff(root: Path, files: Sequence[Path]) -> str:
    if not files:
        return ""
    args = [str(f) for f in files]
    try:
        subprocess.run(["ruff", "check", "--fix", "--quiet", "--select", "I", *args], cwd=root, check=False)
        concise = ["ruff", "check", "--output-format", "concise", *args]
        done = subprocess.run(concise, cwd=root, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return "ruff is not installed: run `ruff check --fix --select I .` yourself"
    return "" if done.returncode == 0 else done.stdout + done.stderr


def check_imports(root: Path, modules: Iterable[str]) -> list[str]:
    """Import each module first, in a fresh interpreter: a cycle made by a new package shows as an ImportError."""
    path = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    failures = []
    for module in modules:
        done = subprocess.run(
            [sys.executable, "-c", f"import {module}"], cwd=root, env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            failures.append(f"import {module}:\n{done.stderr.strip()[-1500:]}")
    return failures


# ------------------------------------------------------------------------------------------------------------


def main(
    argv: Sequence[str] | None = None, moves: dict[str, str] = MOVES, packages: dict[str, Package] = PACKAGES
) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--no-check-imports", action="store_true", help="skip importing the moved modules")
    parser.add_argument("--root", type=Path, default=None, help="the repository (default: the current one)")
    args = parser.parse_args(argv)
    root = (args.root or Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())).resolve()

    tree = Tree(root, moves, packages)
    moves, notes = plan_moves(tree)
    dry = args.dry_run
    say = print

    # 1. moves and packages
    for src, dst in moves:
        say(f"{'would move' if dry else 'move'} {src} -> {dst}")
        if not dry:
            (root / dst).parent.mkdir(parents=True, exist_ok=True)
            git(root, "mv", str(src), str(dst))
    changed: set[Path] = set()
    for package in tree.packages:
        rel = package_init(package)
        path = root / rel
        text = ruff_fixed(root, rel, render_init(tree, package), "I,RUF022")
        if path.is_file() and path.read_text() == text:
            continue
        say(f"{'would write' if dry else 'write'} {rel} ({len(tree.package_exports(package))} names)")
        changed.add(rel)
        if not dry:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            git(root, "add", str(rel))
    generated = {package_init(p) for p in tree.packages}
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text()
        new_text = updated_pyproject(text, tree.packages)
        if new_text != text:
            say(f"{'would add' if dry else 'add'} the new packages to pyproject.toml [tool.setuptools] packages")
            changed.add(Path("pyproject.toml"))
            if not dry:
                pyproject.write_text(new_text)

    # 2. references
    rewriter = Rewriter(tree)
    for rel in text_files(root):
        if rel in generated:
            continue
        path = root / rel
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if rel.suffix in TEXT_SUFFIXES_IF_MENTIONED and not any(m in text for m in tree.moves):
            continue
        new_text = rewriter.rewrite(text, rel)
        if new_text != text and rel.suffix == ".py":
            new_text = wrap_long_prose(new_text, text)
        if new_text != text:
            diff = difflib.unified_diff(text.splitlines(), new_text.splitlines(), lineterm="", n=0)
            count = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
            say(f"{'would rewrite' if dry else 'rewrite'} {rel} ({count} lines)")
            if not dry:
                path.write_text(new_text)
            changed.add(rel)

    for note in notes + rewriter.notes:
        say(f"note: {note}")
    if not (changed or moves):
        say("nothing to do: the tree is already regrouped")
    if dry:
        return 0

    # 3. ruff and what is left
    report = run_ruff(root, sorted(p for p in changed if p.suffix == ".py"))
    if report:
        say("ruff reports, on the changed files (fix these by hand):\n" + report)
    left = leftovers(root, text_files(root), tree)
    for line in left:
        say(line)

    # 4. imports
    failures: list[str] = []
    if not args.no_check_imports:
        failures = check_imports(root, [*tree.packages, *tree.moves.values()])
        for failure in failures:
            say(failure)
    return 1 if failures or report else 0


if __name__ == "__main__":
    sys.exit(main())
