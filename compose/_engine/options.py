"""Per-call options of a compiled graph: parsed from keyword arguments, then checked against the compiled tables
before the run starts, so that a misspelt node key or a malformed option fails at the call with an error naming
it instead of being ignored (eino-semantics 1.10: "option has designated an unknown node", "cannot designate sub
path of a component").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compose._engine.tables import NOTHING
from compose.callbacks import CallbackHandler
from compose.errors import GraphRunError
from compose.interrupt import StopRequest

if TYPE_CHECKING:
    from compose._engine.tables import NodeRT, Tables


_UNSET: Any = NOTHING


@dataclass(frozen=True, slots=True)
class CallOptions:
    """Per-call options of a compiled graph (see ``Runnable.invoke``)."""

    max_run_steps: int | None = None
    callbacks: Sequence[CallbackHandler] | None = None
    designate: Sequence[str | Sequence[str]] | None = None
    node_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    checkpoint_id: str | None = None
    resume: Mapping[str, Any] = field(default_factory=dict)
    state_modifier: Callable[[list[str], Any], Any] | None = None
    force_new_run: bool = False
    external_interrupt: StopRequest | None = None  # the one way to stop a run from outside
    # resuming: take over a claim on the checkpoint older than this many seconds (its worker died mid-resume)
    claim_stale_after: float | None = None
    # history (compile(keep_history=...)): continue from this step of the history, of this branch ("main" when
    # None), as a new branch, or under a new checkpoint id (fork_id)
    from_step: int | None = None
    branch: str | None = None
    fork_id: str | None = None
    # answer every open interrupt of the checkpoint with this value
    resume_all: Any = _UNSET
    # not a call option: told each time a step of the top graph is over, its post handlers run (a stream_mode
    # reader's snapshots); the run is then a ``stepped.SteppedRun``
    step_watch: Callable[[Any], None] | None = None

    @classmethod
    def parse(cls, opts: Mapping[str, Any]) -> CallOptions:
        if not opts:
            return _DEFAULT_OPTIONS
        unknown = set(opts) - _OPTION_NAMES
        if unknown:
            raise TypeError(f"unknown run option(s) {sorted(unknown)}; expected one of {sorted(_OPTION_NAMES)}")
        options = cls(**opts)
        if options.from_step is None and (options.branch is not None or options.fork_id is not None):
            raise TypeError("branch= and fork_id= name where a replay continues: they need from_step=")
        if options.from_step is not None and options.checkpoint_id is None:
            raise TypeError("from_step= replays the history of a checkpoint id: it needs checkpoint_id=")
        return options

    def check(self, tables: Tables, *, top: bool) -> None:
        """Raise ``GraphRunError`` for node options or callback designations that ``tables`` cannot take.
        Designations address the whole tree of graphs, so only the top-level run (``top``) checks them."""
        for key, opts in self.node_options.items():
            node = _node(tables, key, f"node_options['{key}']")
            if not isinstance(opts, Mapping):
                raise GraphRunError(
                    f"node_options['{key}'] must be a mapping of keyword options, got {type(opts).__qualname__}"
                )
            if node.sub is not None:  # a sub-graph's options are the call options of its own run
                try:
                    sub_options = CallOptions.parse(opts)
                except TypeError as exc:
                    raise GraphRunError(f"node_options['{key}'] (sub-graph): {exc}") from exc
                sub_options.check(node.sub._tables, top=False)
            elif opts and not node.takes_options:
                raise GraphRunError(
                    f"node '{key}' takes no options: its function has no **kwargs parameter "
                    f"(node_options['{key}'] has {sorted(opts)})"
                )
        if top and self.designate:
            if not self.callbacks:
                raise GraphRunError("designate= names the nodes for callbacks=, but no callbacks were given")
            for target in self.designate:
                path = (target,) if isinstance(target, str) else tuple(target)
                if not path:
                    raise GraphRunError("designate= has an empty path")
                _check_path(tables, path, list(path))


def _node(tables: Tables, key: str, where: str) -> NodeRT:
    for node in tables.nodes:
        if node.key == key:
            return node
    raise GraphRunError(
        f"option has designated an unknown node: '{key}' in {where} (graph '{tables.name}', nodes: "
        f"{[n.key for n in tables.nodes]})"
    )


def _check_path(tables: Tables, path: tuple[str, ...], full: list[str]) -> None:
    node = _node(tables, path[0], f"designate={full}")
    if len(path) > 1:
        if node.sub is None:
            raise GraphRunError(f"cannot designate sub path of a component: {full} ('{path[0]}' is not a sub-graph)")
        _check_path(node.sub._tables, path[1:], full)


_DEFAULT_OPTIONS = CallOptions()
_OPTION_NAMES = frozenset(CallOptions.__dataclass_fields__) - {"step_watch"}
