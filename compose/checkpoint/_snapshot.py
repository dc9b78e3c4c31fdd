"""A paused run as data: what a checkpoint holds (eino-semantics 1.9), serialised as JSON through pydantic.

Values are dumped with a ``TypeAdapter`` of the type the graph declares for them (a node's output type, the
graph's input type, the state type), so a typed graph round-trips its values exactly; values typed ``Any`` come
back as JSON data. Streams are concatenated before saving and come back as one-chunk streams.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter
from pydantic_core import PydanticSerializationError

from compose._types import type_name
from compose.errors import CheckpointError


class SignalRecord(BaseModel):
    """An ``InterruptSignal`` (and, for composite nodes, its children) as saved."""

    id: str
    segment: str = ""
    info: Any = None
    has_state: bool = False
    state: Any = None
    subs: list[SignalRecord] = Field(default_factory=list)


class RerunRecord(BaseModel):
    """A node that paused from inside and runs again on resume."""

    key: str
    signal: SignalRecord | None = None  # the node's own interrupt (None for a sub-graph that paused)
    sub: RunSnapshot | None = None  # a paused sub-graph's own snapshot
    has_input: bool = False  # a task abandoned by an external interrupt keeps its input
    input: Any = None


class RunSnapshot(BaseModel):
    """Everything needed to continue a run: inboxes, outputs not yet routed, state, nodes to re-run."""

    streaming: bool
    steps: int
    inbox: dict[str, dict[str, Any]] = Field(default_factory=dict)
    pending: list[tuple[str, Any]] = Field(default_factory=list)
    has_state: bool = False
    state: Any = None
    reruns: list[RerunRecord] = Field(default_factory=list)
    # DAG bookkeeping: predecessors that reported / were skipped, per node
    reported: dict[str, list[str]] = Field(default_factory=dict)
    skipped: dict[str, list[str]] = Field(default_factory=dict)
    ready: list[str] = Field(default_factory=list)
    self_interrupt_id: str | None = None  # the id of a static interrupt (resuming it with data replaces the state)
    # with keep_history: the (branch, step) of the run's history this snapshot was taken at
    lineage: tuple[str, int] | None = None


@lru_cache(maxsize=512)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def dump_value(tp: Any, value: Any, what: str = "a value") -> Any:
    """A JSON-compatible form of ``value`` of declared type ``tp``; ``CheckpointError`` naming ``what`` (the graph
    state, the output of node 'x', ...) when pydantic cannot serialise it."""
    try:
        try:
            return _adapter(tp).dump_python(value, mode="json")
        except TypeError:  # an unhashable typing construct: no cache
            return TypeAdapter(tp).dump_python(value, mode="json")
    except PydanticSerializationError as exc:
        raise CheckpointError(
            f"cannot save {what} in a checkpoint: {exc}; keep JSON-serialisable data (or pydantic models) there, "
            "or declare a type pydantic can serialise",
            reason="encode",
        ) from exc


def load_value(tp: Any, data: Any) -> Any:
    """The value of declared type ``tp`` from its JSON-compatible form."""
    try:
        return _adapter(tp).validate_python(data)
    except TypeError:
        return TypeAdapter(tp).validate_python(data)


FINGERPRINT_PARTS = ("structure", "node types", "state type", "sub-graphs")
"""What a graph fingerprint is made of, in order: one 8-hex-digit hash each, joined by ``.``."""


def _schema_text(tp: Any) -> str:
    """The state type as the checkpoint sees it: its JSON schema (so a changed field changes it), else its name."""
    try:
        return _cached_schema_text(tp)
    except TypeError:  # an unhashable typing construct: no cache
        return _uncached_schema_text(tp)


def _uncached_schema_text(tp: Any) -> str:
    if tp is None:
        return "<no state>"
    try:
        schema = TypeAdapter(tp).json_schema(mode="serialization")
    except Exception:  # a type pydantic cannot describe (arbitrary classes): its name is all we have
        return type_name(tp)
    return f"{type_name(tp)}:{json.dumps(schema, sort_keys=True, default=str)}"


_cached_schema_text = lru_cache(maxsize=256)(_uncached_schema_text)  # compiling an agent compiles its graph


def fingerprint(
    keys: tuple[str, ...],
    edges: list[tuple[str, str]],
    types: list[Any],
    name: str,
    *,
    state_type: Any = None,
    subs: Sequence[str] = (),
) -> str:
    """A stable hash of a compiled graph: a checkpoint only resumes the graph that wrote it.

    One short hash per part of :data:`FINGERPRINT_PARTS` (structure: name, node keys, edges and branch ends;
    the nodes' types; the state type's JSON schema; the sub-graphs' own fingerprints), so that a refused
    checkpoint can say which part changed (:func:`fingerprint_changes`).
    """
    texts = [
        "|".join([name, ",".join(keys), ",".join(f"{a}>{b}" for a, b in edges)]),
        ",".join(map(type_name, types)),
        _schema_text(state_type),
        ",".join(subs),
    ]
    return ".".join(hashlib.sha256(t.encode()).hexdigest()[:8] for t in texts)


def fingerprint_changes(old: str, new: str) -> list[str]:
    """The parts of :data:`FINGERPRINT_PARTS` in which two fingerprints differ (empty when either is not of
    this form, e.g. written by an older pyeino)."""
    a, b = old.split("."), new.split(".")
    if len(a) != len(FINGERPRINT_PARTS) or len(b) != len(FINGERPRINT_PARTS):
        return []
    return [part for part, x, y in zip(FINGERPRINT_PARTS, a, b, strict=True) if x != y]
