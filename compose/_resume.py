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

from compose._snapshot import RerunRecord, RunSnapshot, SignalRecord, dump_value, load_value
from compose._types import zero_value
from compose.errors import GraphInterrupt
from compose.interrupt import InterruptCtx, InterruptInfo, InterruptSignal, ResumeContext, _Resumed
from compose.stream import StreamReader, concat

if TYPE_CHECKING:
    from compose._engine import GraphRun

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


async def _plain(run: GraphRun, value: Any) -> Any:
    return await concat(value) if run.streaming and isinstance(value, StreamReader) else value


async def pause(
    run: GraphRun,
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
    run: GraphRun,
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
