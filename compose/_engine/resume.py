"""Pausing a run into a ``RunSnapshot`` and continuing it from one (eino-semantics 1.9).

``pause()`` is called by the scheduler when a static interrupt fires or nodes raised interrupt signals: it turns
the run's inboxes, unrouted outputs, state and the interrupted nodes into data and returns the ``GraphInterrupt``
to raise (with ``.snapshot`` attached). ``restore()`` puts a snapshot back into a fresh ``GraphRun``: interrupted
nodes get the zero value of their input type (Eino's rule) and, while they run again, ``get_interrupt_state()``
and ``get_resume_context()`` answer for them.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from compose._engine.tables import NOTHING
from compose._types import type_name, zero_value
from compose.checkpoint import claim_checkpoint, decode_checkpoint, read_checkpoint_header
from compose.checkpoint._protocol import _release_claim_after
from compose.checkpoint._snapshot import (
    RerunRecord,
    RunSnapshot,
    SignalRecord,
    dump_value,
    fingerprint_changes,
    load_value,
)
from compose.errors import (
    CheckpointError,
    CheckpointNotFoundError,
    GraphInterrupt,
    GraphRunError,
    InterruptNotFoundError,
)
from compose.interrupt import InterruptCtx, InterruptInfo, InterruptSignal, ResumeContext, _Resumed
from compose.stream import StreamReader, concat

if TYPE_CHECKING:
    from compose._engine.options import CallOptions
    from compose._engine.run_state import RunState
    from compose._engine.tables import Tables

GRAPH_CHECKPOINT_KIND = "graph-run"
RERUN_SOURCE = -1  # the inbox key under which a re-run node's (zero) input is placed


def _record(sig: InterruptSignal) -> SignalRecord:
    return SignalRecord(
        id=sig.id,
        segment=sig.segment,
        info=dump_value(Any, sig.info, "an interrupt's info"),
        has_state=sig.has_state,
        state=dump_value(Any, sig.state, "an interrupt's state") if sig.has_state else None,
        subs=[_record(s) for s in sig.subs],
    )


def _contexts(sig: InterruptSignal, address: str, parent: InterruptCtx | None, out: list[InterruptCtx]) -> None:
    """The user-facing contexts of a signal tree: its root causes (leaves), each linked to its composites. The
    ``info`` is the object given to ``interrupt()`` (the checkpoint holds its JSON form)."""
    here = f"{address};{sig.segment}" if sig.segment else address
    ctx = InterruptCtx(sig.id, here, sig.info, is_root_cause=not sig.subs, parent=parent)
    if not sig.subs:
        out.append(ctx)
    for sub in sig.subs:
        _contexts(sub, here, ctx, out)


async def _plain(run: RunState, value: Any) -> Any:
    return await concat(value) if run.streaming and isinstance(value, StreamReader) else value


async def pause(
    run: RunState,
    *,
    before: Sequence[int] = (),
    after: Sequence[int] = (),
    reruns: Sequence[tuple[int, GraphInterrupt]] = (),
    abandoned: Sequence[tuple[int, Any]] = (),
) -> GraphInterrupt:
    """Snapshot ``run`` and build the ``GraphInterrupt`` that ends it."""
    t = run.t
    keys = t.keys
    out_type = t.out_types
    inbox: dict[str, dict[str, Any]] = {}
    for j, box in run.inbox.items():
        inbox[keys[j]] = {
            (keys[p] if p >= 0 else "__rerun__"): dump_value(
                out_type[p] if p >= 0 else t.nodes[j].inbox_type,
                await _plain(run, v),
                f"the input waiting for node '{keys[j]}'",
            )
            for p, v in box.items()
        }
    pending = [
        (keys[src], dump_value(out_type[src], await _plain(run, v), f"the output of node '{keys[src]}'"))
        for src, v in run.pending
    ]
    state = run.frame.state if run.frame is not None else None
    snap = RunSnapshot(
        streaming=run.streaming,
        steps=run.steps,
        inbox=inbox,
        pending=pending,
        has_state=run.frame is not None,
        state=dump_value(t.state_type, state, f"the state of graph '{t.name}'") if run.frame is not None else None,
        reported={keys[k]: [keys[p] for p in v] for k, v in run.reported.items()},
        skipped={keys[k]: [keys[p] for p in v] for k, v in run.skipped.items()},
        ready=[keys[j] for j in run.ready],
    )
    info = InterruptInfo(
        state=copy.deepcopy(state),
        before_nodes=[keys[j] for j in before],
        after_nodes=[keys[j] for j in after],
    )
    for j, x in abandoned:  # cut off by an external interrupt: re-run with the same input
        info.rerun_nodes.append(keys[j])
        data = dump_value(t.nodes[j].inbox_type, await _plain(run, x), f"the input of node '{keys[j]}'")
        snap.reruns.append(RerunRecord(key=keys[j], has_input=True, input=data))
    if before or after or abandoned:
        snap.self_interrupt_id = str(uuid.uuid4())
        info.interrupt_contexts.append(InterruptCtx(snap.self_interrupt_id, run.address, info.state))
    for j, exc in reruns:
        key = keys[j]
        info.rerun_nodes.append(key)
        node_address = f"{run.address};node:{key}"
        child = getattr(exc, "snapshot", None)
        if isinstance(child, RunSnapshot):  # a sub-graph paused inside this node
            snap.reruns.append(RerunRecord(key=key, sub=child))
            if isinstance(exc.info, InterruptInfo):
                info.sub_graphs[key] = exc.info
                info.interrupt_contexts.extend(exc.info.interrupt_contexts)
            continue
        assert isinstance(exc, InterruptSignal)
        snap.reruns.append(RerunRecord(key=key, signal=_record(exc)))
        info.rerun_nodes_extra[key] = exc.info
        _contexts(exc, node_address, None, info.interrupt_contexts)
    interrupt = GraphInterrupt(info)
    interrupt.snapshot = snap  # type: ignore[attr-defined]
    return interrupt


def _targets(rec: SignalRecord, resume: Mapping[str, Any]) -> bool:
    return rec.id in resume or any(_targets(s, resume) for s in rec.subs)


def resumed_for(rec: SignalRecord, resume: Mapping[str, Any]) -> _Resumed:
    """What a re-run node (or tool) sees through get_interrupt_state() / get_resume_context()."""
    ctx = ResumeContext(is_target=_targets(rec, resume), has_data=rec.id in resume, data=resume.get(rec.id))
    return _Resumed(True, rec.has_state, rec.state, ctx, rec, resume)


def restore(
    run: RunState,
    snap: RunSnapshot,
    resume: Mapping[str, Any],
    state_modifier: Callable[[list[str], Any], Any] | None,
) -> None:
    """Load ``snap`` into a fresh ``run`` so that its next step continues where the paused run stopped."""
    t = run.t
    index = {k: i for i, k in enumerate(t.keys)}
    streaming = run.streaming

    def value(tp: Any, data: Any) -> Any:
        v = load_value(tp, data)
        return StreamReader.from_iterable((v,)) if streaming else v

    for key, box in snap.inbox.items():
        j = index[key]
        run.inbox[j] = {
            (index[p] if p != "__rerun__" else RERUN_SOURCE): value(
                t.out_types[index[p]] if p != "__rerun__" else t.nodes[j].inbox_type, v
            )
            for p, v in box.items()
        }
    for key, data in snap.pending:
        i = index[key]
        run.pending.append((i, value(t.out_types[i], data)))
    if snap.has_state and run.frame is not None:
        state = load_value(t.state_type, snap.state)
        if snap.self_interrupt_id and snap.self_interrupt_id in resume:
            state = resume[snap.self_interrupt_id]  # targeting the graph's own interrupt replaces its state
        if state_modifier is not None:
            result = state_modifier(list(run.path), state)
            state = state if result is None else result
        run.frame.state = state
    run.steps = snap.steps
    run.reported = {index[k]: {index[p] for p in v} for k, v in snap.reported.items()}
    run.skipped = {index[k]: {index[p] for p in v} for k, v in snap.skipped.items()}
    run.ready.extend(index[k] for k in snap.ready)
    if snap.reruns:
        run.resume_for = {}  # the run's own (a fresh run shares a read-only empty one)
    for rr in snap.reruns:
        j = index[rr.key]
        if rr.has_input:
            run.inbox.setdefault(j, {})[RERUN_SOURCE] = value(t.nodes[j].inbox_type, rr.input)
        else:
            tp = t.nodes[j].input_type
            run.inbox.setdefault(j, {})[RERUN_SOURCE] = value(Any, zero_value(tp)) if streaming else zero_value(tp)
            run.resume_for[j] = (rr, resume)
        if t.dag:
            run.ready.append(j)
    run.skip_before = True
    run.gated = True
    run.rerun_restored = bool(snap.reruns)


# ---------------------------------------------------------------------------------------------------------------
# Loading a checkpoint for a resume


async def claim_snapshot(
    t: Tables, store: Any, checkpoint_id: str, owner: str, *, streaming: bool, options: CallOptions
) -> tuple[RunSnapshot, Mapping[str, Any]] | None:
    """Claim and check the checkpoint a run resumes from; None when there is none (a fresh run). Resume data for
    a checkpoint that does not exist is an error, never a fresh run (which would repeat the paused run's work)."""
    data = await claim_checkpoint(store, checkpoint_id, owner, stale_after=options.claim_stale_after)
    answer_all = options.resume_all is not NOTHING
    if data is None:
        if options.resume or answer_all:
            raise CheckpointNotFoundError(
                checkpoint_id,
                f"resume data {sorted(options.resume)} needs the checkpoint its interrupts were saved in (a resumed "
                "run that completed deletes it); leave out resume= to start a fresh run under this id",
            )
        return None
    try:
        snap = load_snapshot(
            data, t, checkpoint_id, kind=GRAPH_CHECKPOINT_KIND, streaming=streaming, resume=options.resume
        )
    except BaseException as exc:
        await _release_claim_after(exc, store, checkpoint_id, owner)
        raise
    if answer_all:  # resume_all=value: every open interrupt not answered by resume= gets value
        return snap, {**dict.fromkeys(open_interrupts(snap), options.resume_all), **options.resume}
    return snap, options.resume


def open_interrupts(snap: RunSnapshot) -> list[str]:
    """The ids of the interrupts a resume of ``snap`` answers (root causes, sub-graphs' included; not the
    graph's own static interrupt, whose data would replace its state)."""
    ids: list[str] = []

    def leaves(rec: SignalRecord) -> None:
        if not rec.subs:
            ids.append(rec.id)
        for s in rec.subs:
            leaves(s)

    for rr in snap.reruns:
        if rr.signal is not None:
            leaves(rr.signal)
        if rr.sub is not None:
            ids.extend(open_interrupts(rr.sub))
    return ids


def interrupt_ids(snap: RunSnapshot) -> set[str]:
    """Every interrupt id a resume of ``snap`` may target: the graph's own (static) interrupt, each interrupted
    node's signal tree (composites and their children), and the same inside paused sub-graphs."""
    ids: set[str] = set()

    def walk(rec: SignalRecord) -> None:
        ids.add(rec.id)
        for sub in rec.subs:
            walk(sub)

    if snap.self_interrupt_id:
        ids.add(snap.self_interrupt_id)
    for rr in snap.reruns:
        if rr.signal is not None:
            walk(rr.signal)
        if rr.sub is not None:
            ids |= interrupt_ids(rr.sub)
    return ids


def load_snapshot(
    data: bytes, t: Tables, checkpoint_id: str, *, kind: str, streaming: bool, resume: Mapping[str, Any]
) -> RunSnapshot:
    """Decode a graph checkpoint and check that it fits ``t`` and the call before anything runs.

    Raises:
        CheckpointError: the envelope checks of ``decode_checkpoint``; a fingerprint mismatch names the part of
            the graph that changed (structure, node types, state type, sub-graphs); a payload that passed its
            digest but does not fit the graph (reason ``"payload"``) names the value at fault.
        InterruptNotFoundError: ``resume`` names interrupt ids the checkpoint does not have.
        GraphRunError: the checkpoint was written by the other paradigm (invoke vs streaming).
    """
    try:
        snap = decode_checkpoint(data, RunSnapshot, kind=kind, fingerprint=t.fingerprint)
    except CheckpointError as exc:
        if exc.reason != "fingerprint":
            raise
        changed = fingerprint_changes(read_checkpoint_header(data).fingerprint, t.fingerprint)
        if not changed:
            raise
        raise CheckpointError(
            f"checkpoint {checkpoint_id!r} does not fit graph '{t.name}': its {' and '.join(changed)} changed "
            "since the run paused; resume with the graph that wrote it, or use force_new_run=True to start "
            "afresh",
            reason="fingerprint",
        ) from exc
    if snap.streaming != streaming:
        paradigm = "streaming" if snap.streaming else "invoke"
        raise GraphRunError(
            f"checkpoint '{checkpoint_id}' was written by a {paradigm} run; resume it with the same paradigm"
        )
    check_snapshot(snap, t, checkpoint_id)
    known = interrupt_ids(snap)
    unknown = [i for i in resume if i not in known]
    if unknown:
        raise InterruptNotFoundError(checkpoint_id, unknown, sorted(known))
    return snap


def check_snapshot(snap: RunSnapshot, t: Tables, checkpoint_id: str) -> None:
    """Raise ``CheckpointError`` (reason ``"payload"``) naming the first part of ``snap`` that does not fit the
    graph of ``t``: a node it does not have, a value that does not validate as the type declared for it, a state
    where the graph has none (or none where it has one), in this graph or a paused sub-graph."""
    index = {k: i for i, k in enumerate(t.keys)}

    def misfit(what: str, why: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {checkpoint_id!r} does not fit graph '{t.name}': {what} {why}; it was written by an "
            "incompatible version of the graph; use force_new_run=True to start afresh, or delete the checkpoint",
            reason="payload",
        )

    def node(key: str, what: str) -> int:
        if key not in index:
            raise misfit(what, f"names node '{key}', which the graph does not have (nodes: {list(t.keys[: t.n])})")
        return index[key]

    def fits(tp: Any, data: Any, what: str) -> None:
        try:
            load_value(tp, data)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise misfit(what, f"is not a {type_name(tp)} ({loc + ': ' if loc else ''}{err['msg']})") from e

    for key, box in snap.inbox.items():
        j = node(key, "an inbox")
        for p, v in box.items():
            if p == "__rerun__":
                fits(t.nodes[j].inbox_type, v, f"the input kept for node '{key}'")
            else:
                source = node(p, f"the input waiting for node '{key}'")
                fits(t.out_types[source], v, f"the input for node '{key}' from '{p}'")
    for key, v in snap.pending:
        fits(t.out_types[node(key, "an output not yet routed")], v, f"the output of node '{key}'")
    has_state = t.state_type is not None
    if snap.has_state != has_state:
        raise misfit("the state", "is saved but the graph has none" if snap.has_state else "is missing")
    if snap.has_state:
        fits(t.state_type, snap.state, "the state")
    for field, table in (("reported", snap.reported), ("skipped", snap.skipped)):
        for key, preds in table.items():
            node(key, f"the DAG bookkeeping ({field})")
            for p in preds:
                node(p, f"the DAG bookkeeping ({field} of '{key}')")
    for key in snap.ready:
        node(key, "the ready nodes")
    for rr in snap.reruns:
        j = node(rr.key, "an interrupted node")
        if rr.has_input:
            fits(t.nodes[j].inbox_type, rr.input, f"the input of interrupted node '{rr.key}'")
        if rr.sub is not None:
            sub = t.nodes[j].sub
            if sub is None:
                raise misfit(f"node '{rr.key}'", "paused as a sub-graph but is not one")
            check_snapshot(rr.sub, sub._tables, checkpoint_id)
