"""Graph specs as plain data, and building them into real graphs (see ``compose.testing``)."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from compose.graph.branch import GraphBranch, GraphMultiBranch, StreamGraphBranch, StreamGraphMultiBranch
from compose.graph.builder import END, START, Graph
from compose.stream import StreamReader, concat

if TYPE_CHECKING:
    pass

Mode = Literal["any_predecessor", "all_predecessor"]
Rule = Literal["hash", "first", "length"]
Observer = Callable[[str], None]
RULES: tuple[Rule, ...] = ("hash", "first")
MODES: tuple[Mode, ...] = ("any_predecessor", "all_predecessor")

WINDOW = 24
"""A node keeps the last ``WINDOW`` characters of its input text, so values stay small in long loops."""


# ---------------------------------------------------------------------------------------------------------------
# Specs


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node: a lambda appending ``tag`` (``chunks`` > 1: a stream lambda emitting that many pieces), or a
    sub-graph (``sub``). ``fails_on``: the lambda raises ``ValueError`` when this character is in its text."""

    key: str
    tag: str = "a"
    chunks: int = 1
    sub: GraphSpec | None = None
    output_key: str = ""
    fails_on: str = ""

    @property
    def out_key(self) -> str:
        return self.output_key or self.key


@dataclass(frozen=True, slots=True)
class BranchSpec:
    """A branch after ``source``: ``stream`` picks StreamGraphBranch, ``multi`` the multi variant; ``targets``
    are its end nodes (in rule order: for ``"length"``, (continue, exit))."""

    source: str
    targets: tuple[str, ...]
    rule: Rule = "hash"
    stream: bool = False
    multi: bool = False
    threshold: int = 0

    def choose(self, text: str) -> frozenset[str]:
        """The successors this branch picks for a value whose text is ``text``."""
        n = len(self.targets)
        if self.rule == "length":
            return frozenset((self.targets[1] if len(text) >= self.threshold else self.targets[0],))
        code = ord(text[0]) if self.rule == "first" and text else zlib.crc32(text.encode())
        if self.multi:
            return frozenset(t for i, t in enumerate(self.targets) if (code >> i) & 1)
        return frozenset((self.targets[code % n],))


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """A whole graph. Validity (what :func:`graphs` guarantees): every node is reachable from START and reaches
    END; ``all_predecessor`` specs are acyclic; a branch's targets are not plain edge targets of its source."""

    mode: Mode
    nodes: tuple[NodeSpec, ...]
    edges: tuple[tuple[str, str], ...]
    branches: tuple[BranchSpec, ...] = ()
    max_run_steps: int | None = None

    def node(self, key: str) -> NodeSpec:
        return next(n for n in self.nodes if n.key == key)

    def compile_options(self) -> dict[str, Any]:
        """Keyword arguments for ``Graph.compile``."""
        opts: dict[str, Any] = {"trigger_mode": self.mode}
        if self.max_run_steps is not None:
            opts["max_run_steps"] = self.max_run_steps
        return opts

    def step_limit(self) -> int:
        """The Pregel step limit: ``max_run_steps``, by default the number of nodes + 10."""
        return self.max_run_steps if self.max_run_steps is not None else len(self.nodes) + 10

    def all_keys(self) -> list[str]:
        """Node keys, sub-graphs' included."""
        keys: list[str] = []
        for n in self.nodes:
            keys.append(n.key)
            if n.sub is not None:
                keys.extend(n.sub.all_keys())
        return keys

    def to_python(self, var: str = "g", *, compile: bool = True) -> str:
        """Readable Python that builds this graph (used in shrunk-failure reports); it runs after
        ``from compose import *`` and ``from compose.testing import *``."""
        lines: list[str] = []
        for n in self.nodes:
            if n.sub is not None:
                lines.append(n.sub.to_python(f"{var}_{n.key}", compile=False))
        lines.append(f"{var} = Graph()")
        for n in self.nodes:
            out = f", output_key={n.out_key!r}"
            if n.sub is not None:
                opts = n.sub.compile_options()
                lines.append(f"{var}.add_graph_node({n.key!r}, {var}_{n.key}, compile_options={opts!r}{out})")
            else:
                args = [repr(n.key), f"tag={n.tag!r}"]
                args += [f"chunks={n.chunks}"] * (n.chunks > 1) + [f"fails_on={n.fails_on!r}"] * bool(n.fails_on)
                lines.append(f"{var}.add_lambda_node({n.key!r}, node_fn(NodeSpec({', '.join(args)})){out})")
        for s, e in self.edges:
            lines.append(f"{var}.add_edge({_name(s)}, {_name(e)})")
        for b in self.branches:
            targets = ", ".join(_name(t) for t in b.targets) + ("," if len(b.targets) == 1 else "")
            args = [_name(b.source), f"({targets})", repr(b.rule)]
            args += ["stream=True"] * b.stream + ["multi=True"] * b.multi
            args += [f"threshold={b.threshold}"] * (b.rule == "length")
            lines.append(f"{var}.add_branch({_name(b.source)}, branch(BranchSpec({', '.join(args)})))")
        if compile:
            call_opts = ", ".join(f"{k}={v!r}" for k, v in self.compile_options().items())
            lines.append(f"{var}_runnable = {var}.compile({call_opts})")
        return "\n".join(lines)


def _name(key: str) -> str:
    return "START" if key == START else "END" if key == END else repr(key)


# ---------------------------------------------------------------------------------------------------------------
# Value rules (shared by the built graph and the reference)


def flat(value: Any) -> str:
    """A value read as text: a string itself, a dict its values' texts in key order."""
    if isinstance(value, dict):
        return "".join(flat(value[k]) for k in sorted(value))
    return str(value)


def node_text(node: NodeSpec, value: Any) -> str:
    """What a lambda node outputs for ``value`` (before its output key wraps it)."""
    text = flat(value)
    if node.fails_on and node.fails_on in text:
        raise ValueError(f"node {node.key} fails on {node.fails_on!r}")
    return text[-WINDOW:] + node.tag


def _pieces(text: str, chunks: int) -> list[str]:
    """``text`` split into at most ``chunks`` non-empty pieces."""
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]


# ---------------------------------------------------------------------------------------------------------------
# Building a real graph


def build(spec: GraphSpec, *, observer: Observer | None = None) -> Graph[Any, Any]:
    """A ``compose.Graph`` for ``spec``; compile it with ``spec.compile_options()``. ``observer(key)`` is called
    each time a lambda node starts (sub-graph nodes included)."""
    g: Graph[Any, Any] = Graph()
    for n in spec.nodes:
        if n.sub is not None:
            g.add_graph_node(
                n.key, build(n.sub, observer=observer), compile_options=n.sub.compile_options(), output_key=n.out_key
            )
        else:
            g.add_lambda_node(n.key, node_fn(n, observer), output_key=n.out_key)
    for s, e in spec.edges:
        g.add_edge(s, e)
    for b in spec.branches:
        g.add_branch(b.source, branch(b))
    return g


def node_fn(node: NodeSpec, observer: Observer | None = None) -> Callable[..., Any]:
    """The function of a lambda node: async (``chunks`` == 1) or an async generator (a stream lambda)."""
    if node.chunks <= 1:

        async def invoke(value: Any) -> str:
            if observer is not None:
                observer(node.key)
            return node_text(node, value)

        return invoke

    async def stream(value: Any) -> AsyncIterator[str]:
        if observer is not None:
            observer(node.key)
        for piece in _pieces(node_text(node, value), node.chunks):
            yield piece

    return stream


def branch(b: BranchSpec) -> Any:
    """The ``GraphBranch`` (or stream/multi variant) for ``b``."""

    def pick(text: str) -> Any:
        chosen = b.choose(text)
        return set(chosen) if b.multi else next(iter(chosen))

    if not b.stream:
        return (GraphMultiBranch if b.multi else GraphBranch)(lambda v: pick(flat(v)), b.targets)

    async def on_stream(reader: StreamReader[Any]) -> Any:
        if b.rule == "first":  # decides on a prefix: the first chunk starts with the text's first character
            return pick(flat(await reader.recv()))
        return pick(flat(await concat(reader)))

    return (StreamGraphMultiBranch if b.multi else StreamGraphBranch)(on_stream, b.targets)
