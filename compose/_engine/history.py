"""Recording a run's history, replaying from a step, editing a step (``compile(keep_history=...)``).

A run of a graph compiled with ``keep_history`` and called with a ``checkpoint_id`` is a ``RecordedRun``: a
``SteppedRun`` (each step settled where it ends; ``_settled`` writes its snapshot) whose routing hooks keep, for
every value on an edge, its plain (concatenated) form, so that a snapshot can be taken between steps without
reading a stream the run still needs. Runs without history are plain ``GraphRun``s: nothing here is on their
path.

Numbering (``compose.checkpoint._history``): step 0 is taken once START's input is routed, before any node
runs. Pregel: step k once the outputs of superstep k are routed (post handlers run, successors' inboxes filled).
DAG: step k once the k-th node completion is routed; nodes then in flight are recorded as ready with their
input, so a replay from that step runs them again. A pause overwrites the step it happened at with the paused
snapshot and its interrupts (keeping what that step's nodes produced); the final record carries the output and
has no next nodes, also when it is an edit (``update_state``) whose output is routed to END.

In a streaming run a recorded run concatenates each node's output stream where it is routed and passes a
one-chunk stream on (what a pause does to the streams it saves): history costs streaming granularity between
nodes, never the tokens a chat model streams to callbacks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from compose._engine.dag import take_dag
from compose._engine.resume import RERUN_SOURCE, interrupt_ids, open_interrupts, restore
from compose._engine.scheduler import GraphRun
from compose._engine.stepped import SteppedRun
from compose._engine.tables import NOTHING
from compose._types import runtime_checker, type_name
from compose.checkpoint._history import (
    MAIN_BRANCH,
    HistoryRecord,
    StateSnapshot,
    decode_record,
    history_key,
    list_records,
    load_record,
    to_state,
    write_record,
)
from compose.checkpoint._protocol import _has
from compose.checkpoint._snapshot import RunSnapshot, dump_value, load_value
from compose.errors import (
    CheckpointExistsError,
    CheckpointNotFoundError,
    ComposeError,
    EmptyStreamError,
    GraphInterrupt,
    GraphRunError,
    InterruptNotFoundError,
    NodeRunError,
    StateUpdateError,
)
from compose.stream import StreamReader, concat
from compose.stream import close_if_stream as _close
from compose.stream import one_chunk as _one

if TYPE_CHECKING:
    from compose._engine.options import CallOptions
    from compose._engine.tables import NodeRT, Tables
    from compose.callbacks import RunInfo


def _new_branch() -> str:
    return uuid.uuid4().hex[:12]


class Recorder:
    """Where a recorded run writes, and the plain values of what it routes."""

    def __init__(self, tables: Tables, store: Any, checkpoint_id: str) -> None:
        self.t = tables
        self.index = {k: i for i, k in enumerate(tables.keys)}
        self.store = store
        self.checkpoint_id = checkpoint_id
        keep = tables.keep_history
        self.keep: int | None = None if keep is True or keep is None else int(keep)
        self.branch = MAIN_BRANCH
        self.head: tuple[str, int] | None = None  # the last record of this lineage: the next one's parent
        self.head_parent: tuple[str, int] | None = None
        self.written: set[int] = set()  # steps this run wrote (a pause or the end may overwrite those only)
        self.count = 0  # DAG: node completions so far
        self.plain: dict[int, Any] = {}  # source -> its last routed output, plain
        self.boxes: dict[int, dict[int, Any]] = {}  # node -> source -> plain value delivered (mirrors the inboxes)
        self.started: set[int] = set()  # DAG: nodes running
        self.known: list[str] = []  # keys of the history (with keep=N: oldest first)
        self.replay_final: Any = NOTHING  # replaying a final record: its output
        self.editing = False
        self.replay = False  # continuing from a snapshot of the history (not from the live checkpoint)
        self.final_outputs: dict[str, Any] = {}  # Pregel: the outputs routed to END, for the final record
        self.head_outputs: dict[str, Any] = {}

    # ------------------------------------------------------------------ writing

    def _placed(self, step: int) -> tuple[int, tuple[str, int] | None]:
        """Where a record of ``step`` goes and its parent: a step this run has not written yet continues the
        lineage; one at or before the head that this run wrote is overwritten (a pause, the end)."""
        head = self.head
        if head is not None and head[0] == self.branch and step == head[1] and step in self.written:
            return step, self.head_parent
        if head is not None and step <= head[1]:
            step = head[1] + 1
        return step, head

    async def write(
        self,
        run: GraphRun,
        step: int,
        outputs: Mapping[str, Any],
        *,
        snap: RunSnapshot | None = None,
        interrupts: list[dict[str, Any]] | None = None,
        final: bool = False,
        output: Any = None,
    ) -> HistoryRecord:
        step, parent = self._placed(step)
        if snap is None:
            snap = capture(run, self)
        snap.lineage = (self.branch, step)
        record = HistoryRecord(
            checkpoint_id=self.checkpoint_id,
            step=step,
            branch=self.branch,
            parent=parent,
            next_nodes=[] if final else next_nodes(snap, self.t, self.index),
            node_outputs=dict(outputs),
            interrupts=interrupts or [],
            snapshot=snap,
            final=final,
            output=output,
        )
        key = await write_record(self.store, record, self.t.fingerprint)
        self.head, self.head_parent = (self.branch, step), parent
        self.head_outputs = record.node_outputs
        self.written.add(step)
        if self.keep is not None:
            if key in self.known:
                self.known.remove(key)
            self.known.append(key)
            while len(self.known) > self.keep:
                await self.store.delete(self.known.pop(0))
        return record

    def dump_outputs(self, srcs: list[int]) -> dict[str, Any]:
        t = self.t
        return {
            t.keys[s]: dump_value(t.out_types[s], self.plain.get(s), f"the output of node '{t.keys[s]}'")
            for s in srcs
            if s < t.n
        }

    async def write_pause(self, run: GraphRun, exc: GraphInterrupt) -> None:
        snap = getattr(exc, "snapshot", None)
        if not isinstance(snap, RunSnapshot):
            return
        t = self.t
        interrupts = [
            {"id": c.id, "address": c.address, "info": dump_value(Any, c.info, "an interrupt's info")}
            for c in getattr(exc.info, "interrupt_contexts", ())
        ]
        step = self.count if t.dag else run.steps
        outputs = {k: v for k, v in snap.pending if k in t.keys[: t.n]}
        if self.head == (self.branch, step) and step in self.written:
            # the pause overwrites the record of the step that just ended (a pause before the next nodes): it
            # keeps what that step's nodes produced
            outputs = {**self.head_outputs, **outputs}
        await self.write(run, step, outputs, snap=snap, interrupts=interrupts)

    async def write_final(self, run: GraphRun, output: Any, outputs: Mapping[str, Any] | None = None) -> HistoryRecord:
        """The final record, with the run's ``output`` (plain); ``outputs``: what the last step's nodes produced
        (by default, what the run routed to END)."""
        t = self.t
        state = run.frame.state if run.frame is not None else None
        snap = RunSnapshot(
            streaming=run.streaming,
            steps=run.steps,
            has_state=run.frame is not None,
            state=dump_value(t.state_type, state, f"the state of graph '{t.name}'") if run.frame is not None else None,
        )
        if outputs is None:
            # DAG: the end overwrites the record of the last completion (it keeps what that node produced)
            outputs = self.final_outputs if not t.dag else self.head_outputs if self.count in self.written else {}
        data = dump_value(t.output_type, output, f"the output of graph '{t.name}'")
        return await self.write(run, self.count if t.dag else run.steps, outputs, snap=snap, final=True, output=data)


def capture(run: GraphRun, rec: Recorder) -> RunSnapshot:
    """The run between steps as a ``RunSnapshot`` (the plain values of its inboxes from ``rec``)."""
    t = run.t
    keys = t.keys

    def dump_box(j: int, box: Mapping[int, Any]) -> dict[str, Any]:
        return {
            (keys[p] if p >= 0 else "__rerun__"): dump_value(
                t.out_types[p] if p >= 0 else t.nodes[j].inbox_type, v, f"the input waiting for node '{keys[j]}'"
            )
            for p, v in box.items()
        }

    inbox: dict[str, dict[str, Any]] = {}
    for j, box in run.inbox.items():
        plain = rec.boxes.get(j, {})
        inbox[keys[j]] = dump_box(j, {p: plain.get(p, v) for p, v in box.items()})
    ready = [keys[j] for j in run.ready]
    if t.dag:  # nodes in flight: ready again, with the input they took
        flying = [j for j in (*rec.boxes, *sorted(rec.started)) if j not in run.inbox]
        for j in dict.fromkeys(flying):
            if rec.boxes.get(j):
                inbox[keys[j]] = dump_box(j, rec.boxes[j])
            ready.insert(0, keys[j])
    state = run.frame.state if run.frame is not None else None
    return RunSnapshot(
        streaming=run.streaming,
        steps=run.steps,
        inbox=inbox,
        has_state=run.frame is not None,
        state=dump_value(t.state_type, state, f"the state of graph '{t.name}'") if run.frame is not None else None,
        reported={keys[k]: [keys[p] for p in v] for k, v in run.reported.items()},
        skipped={keys[k]: [keys[p] for p in v] for k, v in run.skipped.items()},
        ready=list(dict.fromkeys(ready)),
    )


def next_nodes(snap: RunSnapshot, t: Tables, index: Mapping[str, int] | None = None) -> list[str]:
    """The nodes that run next from ``snap``: ready (DAG) or with an inbox (Pregel), nodes to re-run, and the
    successors of outputs not yet routed (a pause after nodes)."""
    if index is None:
        index = {k: i for i, k in enumerate(t.keys)}
    names: list[str] = [*(snap.ready if t.dag else snap.inbox), *(r.key for r in snap.reruns)]
    for key, _ in snap.pending:
        i = index[key]
        names += [t.keys[s] for s in t.succ[i]] + [t.keys[e] for b in t.branches[i] for e in b.ends]
    return [k for k in dict.fromkeys(names) if index.get(k, t.end) < t.n]


def _boxes_of(t: Tables, snap: RunSnapshot) -> dict[int, dict[int, Any]]:
    """The plain inbox values of a snapshot a run is restored from (as ``restore`` loads them)."""
    index = {k: i for i, k in enumerate(t.keys)}
    boxes: dict[int, dict[int, Any]] = {}
    for key, box in snap.inbox.items():
        j = index[key]
        boxes[j] = {
            (index[p] if p != "__rerun__" else RERUN_SOURCE): load_value(
                t.out_types[index[p]] if p != "__rerun__" else t.nodes[j].inbox_type, v
            )
            for p, v in box.items()
        }
    for rr in snap.reruns:
        if rr.has_input:
            j = index[rr.key]
            boxes.setdefault(j, {})[RERUN_SOURCE] = load_value(t.nodes[j].inbox_type, rr.input)
    return boxes


class RecordedRun(SteppedRun):
    """A ``GraphRun`` that writes its history (see the module docstring)."""

    __slots__ = ("rec",)

    def __init__(self, tables: Tables, rec: Recorder, **kwargs: Any) -> None:
        super().__init__(tables, **kwargs)
        self.rec = rec

    def __repr__(self) -> str:
        return f"Recorded{super().__repr__()[:-1]}, branch={self.rec.branch!r})"

    async def _plain_of(self, src: int, out: Any) -> tuple[Any, Any]:
        """(plain value, value to route on) of ``src``'s output."""
        if not self.streaming:
            return out, out
        try:
            value = await concat(out)
        except EmptyStreamError:
            return None, StreamReader.from_iterable(())
        except Exception as exc:
            if isinstance(exc, ComposeError) or src >= self.t.n:
                raise
            raise NodeRunError([*self.path, self.t.keys[src]], exc) from exc
        return value, _one(value)

    async def _begin(self, value: Any) -> None:
        await super()._begin(value)
        if self.restore_from is not None:
            self.rec.boxes = _boxes_of(self.t, self.restore_from[0])

    async def step(self, to_end: bool = False, until: Any = None) -> bool:
        rec = self.rec
        tokens = self._enter()  # what is written runs in the run's context too (``GraphRun.step`` sets it again)
        try:
            if rec.replay_final is not NOTHING:  # the run ended here: its output, no node runs
                await self._close_all()
                await self._end_run(_one(rec.replay_final) if self.streaming else rec.replay_final)
                return True
            try:
                done = await super().step(to_end, until)
            except GraphInterrupt as exc:
                await rec.write_pause(self, exc)
                raise
            if done:
                plain, self.result = await self._plain_of(self.t.end, self.result)
                await rec.write_final(self, plain)
            return done
        finally:
            self._exit(tokens)

    async def _settled(self, srcs: list[int]) -> None:
        """A step is over (its post handlers run, its outputs routed): its snapshot (see the module docstring)."""
        rec = self.rec
        t = self.t
        if rec.editing:
            return
        if t.dag:
            src = srcs[0]
            rec.boxes.pop(src, None)
            rec.started.discard(src)
            if src == t.start:
                if rec.head is None:
                    await rec.write(self, 0, {})
                return
            rec.count += 1
            await rec.write(self, rec.count, rec.dump_outputs([src]))
        else:
            for j in [j for j in rec.boxes if j not in self.inbox]:  # the inputs of nodes that ran
                del rec.boxes[j]
            outputs = rec.dump_outputs(srcs)
            if t.end in self.inbox:
                rec.final_outputs = outputs  # the final record keeps them
            elif rec.head is None or self.steps > rec.head[1]:
                await rec.write(self, self.steps, outputs)
        await super()._settled(srcs)

    async def _exec(self, j: int, x: Any) -> Any:
        if self.t.dag:
            self.rec.started.add(j)
        return await super()._exec(j, x)

    async def _post(self, node: NodeRT, out: Any) -> Any:
        out = await super()._post(node, out)
        self.rec.plain[node.index], out = await self._plain_of(node.index, out)
        return out

    async def _finish(self, src: int, out: Any) -> None:
        self.rec.plain[src], out = await self._plain_of(src, out)
        await super()._finish(src, out)

    def _deliver(self, src: int, dst: int, value: Any) -> None:
        super()._deliver(src, dst, value)
        self.rec.boxes.setdefault(dst, {})[src] = self.rec.plain.get(src, value)


# ---------------------------------------------------------------------------------------------------------------
# Opening a recorded run


async def open_history(
    t: Tables, store: Any, checkpoint_id: str, options: CallOptions, *, streaming: bool
) -> tuple[Recorder, tuple[RunSnapshot, Mapping[str, Any]] | None]:
    """The recorder of a run with history; with ``from_step``, the snapshot it continues from."""
    rec = Recorder(t, store, checkpoint_id)
    if rec.keep is not None:
        rec.known = await list_records(store, checkpoint_id)
    if options.from_step is None:
        return rec, None
    branch = options.branch or MAIN_BRANCH
    record = await load_record(store, checkpoint_id, branch, options.from_step, t.fingerprint)
    snap = record.snapshot
    from compose._engine.resume import check_snapshot

    check_snapshot(snap, t, checkpoint_id)
    resume = dict(options.resume)
    if options.resume_all is not NOTHING:
        resume.update(dict.fromkeys(open_interrupts(snap), options.resume_all))
    unknown = [i for i in resume if i not in interrupt_ids(snap)]
    if unknown:
        raise InterruptNotFoundError(checkpoint_id, unknown, sorted(interrupt_ids(snap)))
    if options.fork_id is not None:
        await _copy_lineage(t, store, record, options.fork_id)
        rec.checkpoint_id = options.fork_id
        rec.head = (MAIN_BRANCH, record.step)
        if rec.keep is not None:  # keep=N counts the fork's records, never the original's
            rec.known = await list_records(store, options.fork_id)
    elif not record.interrupts and await store.get(history_key(checkpoint_id, branch, record.step + 1)) is None:
        # the tip of its branch (an edit's snapshot, a failed run's last step): continue that branch
        rec.branch, rec.head, rec.head_parent = branch, (branch, record.step), record.parent
    else:
        rec.branch = _new_branch()
        rec.head = (record.branch, record.step)
    rec.count = record.step
    if record.final:
        rec.replay_final = load_value(t.output_type, record.output)
    return rec, (snap, resume)


async def open_recorded(
    t: Tables, store: Any, checkpoint_id: str, options: CallOptions, streaming: bool
) -> tuple[Callable[..., GraphRun], str, tuple[RunSnapshot, Mapping[str, Any]] | None]:
    """``Runnable._open`` for a graph with history: (how to make the run, the checkpoint id it writes to, the
    snapshot a replay continues from)."""
    rec, replay = await open_history(t, store, checkpoint_id, options, streaming=streaming)
    rec.replay = replay is not None
    return partial(RecordedRun, rec=rec), rec.checkpoint_id, replay


async def begin_lineage(make: Any, restore: tuple[RunSnapshot, Any] | None, claimed: bool) -> None:
    """Where a recorded run starts in its history: a fresh run on the main branch (a new one when the id has a
    history already), a resumed one where its checkpoint was taken; a replay was placed by ``open_history``."""
    rec: Recorder = make.keywords["rec"]
    if restore is None:
        await start_lineage(rec)
    elif claimed and not rec.replay:
        lineage_of(rec, restore[0])


def lineage_of(rec: Recorder, snap: RunSnapshot) -> None:
    """A run resumed from its live checkpoint continues the lineage that checkpoint was taken at."""
    if snap.lineage is not None:
        rec.branch, step = snap.lineage
        rec.head = (rec.branch, step)
        rec.count = step


async def start_lineage(rec: Recorder) -> None:
    """A fresh run: the main branch, or a new one when the id already has a history."""
    if await rec.store.get(history_key(rec.checkpoint_id, MAIN_BRANCH, 0)) is not None:
        rec.branch = _new_branch()


async def _copy_lineage(t: Tables, store: Any, record: HistoryRecord, fork_id: str) -> None:
    """Copy ``record`` and its ancestors under ``fork_id`` as its main branch; ``CheckpointExistsError`` (nothing
    written) when ``fork_id`` already has a history or a saved checkpoint: a fork never overwrites a run."""
    if _has(store, "list"):
        held = len(await list_records(store, fork_id))
    else:
        held = int(await store.get(history_key(fork_id, MAIN_BRANCH, 0)) is not None)
    if held:
        raise CheckpointExistsError(record.checkpoint_id, fork_id, f"a history ({held} snapshot(s))")
    if await store.get(fork_id) is not None:
        raise CheckpointExistsError(record.checkpoint_id, fork_id, "a saved checkpoint (a paused run)")
    chain = [record]
    while chain[-1].parent is not None:
        b, s = chain[-1].parent
        try:
            chain.append(await load_record(store, record.checkpoint_id, b, s, t.fingerprint))
        except CheckpointNotFoundError:
            break  # pruned (keep_history=N): the copy starts at the oldest record kept
    previous: tuple[str, int] | None = None
    for r in reversed(chain):
        copy = r.model_copy(update={"checkpoint_id": fork_id, "branch": MAIN_BRANCH, "parent": previous})
        await write_record(store, copy, t.fingerprint)
        previous = (MAIN_BRANCH, r.step)


# ---------------------------------------------------------------------------------------------------------------
# Reading and editing


def _store_of(t: Tables) -> Any:
    store = t.checkpoint_store
    if store is None:
        raise GraphRunError(f"graph '{t.name}' has no checkpoint store: its history cannot be read")
    return store


async def get_state_history(t: Tables, checkpoint_id: str) -> list[StateSnapshot]:
    store = _store_of(t)
    out: list[StateSnapshot] = []
    for key in reversed(await list_records(store, checkpoint_id)):
        data = await store.get(key)
        if data is not None:
            out.append(to_state(*decode_record(data, t.fingerprint)))
    return out


async def get_state(
    t: Tables, checkpoint_id: str, step: int | None = None, branch: str | None = None
) -> StateSnapshot | None:
    store = _store_of(t)
    if step is not None:
        record = await load_record(store, checkpoint_id, branch or MAIN_BRANCH, step, t.fingerprint)
        data = await store.get(history_key(checkpoint_id, record.branch, record.step))
        assert data is not None
        return to_state(*decode_record(data, t.fingerprint))
    for snap in await get_state_history(t, checkpoint_id):
        if branch is None or snap.branch == branch:
            return snap
    return None


async def update_state(
    t: Tables,
    info: RunInfo,
    checkpoint_id: str,
    step: int,
    *,
    as_node: str,
    output: Any,
    state: Mapping[str, Any] | None,
    fork_id: str | None,
    branch: str | None,
) -> StateSnapshot:
    store = _store_of(t)
    record = await load_record(store, checkpoint_id, branch or MAIN_BRANCH, step, t.fingerprint)
    index = {k: i for i, k in enumerate(t.keys[: t.n])}
    where = f"update_state({checkpoint_id!r}, step={step}, as_node={as_node!r})"
    if as_node not in index:
        raise StateUpdateError(f"{where}: graph '{t.name}' has no node '{as_node}' (nodes: {list(t.keys[: t.n])})")
    if as_node not in record.next_nodes:
        raise StateUpdateError(
            f"{where}: node '{as_node}' does not run after step {step} (the nodes that do: {record.next_nodes}); "
            "an edit stands for the output of a node that runs from that snapshot"
        )
    j = index[as_node]
    tp = t.out_types[j]
    if not runtime_checker(tp)(output):
        raise StateUpdateError(
            f"{where}: the output of node '{as_node}' must be a {type_name(tp)}, got {type(output).__qualname__}"
        )
    snap = record.snapshot
    rec = Recorder(t, store, checkpoint_id)
    rec.editing = True
    if fork_id is not None:
        await _copy_lineage(t, store, record, fork_id)
        rec.checkpoint_id, rec.head = fork_id, (MAIN_BRANCH, record.step)
    else:
        rec.branch, rec.head = _new_branch(), (record.branch, record.step)
    from compose._engine.options import CallOptions

    run = RecordedRun(
        t, rec, streaming=snap.streaming, options=CallOptions(), path=(), info=info, restore_from=(snap, {})
    )
    tokens = run._enter()
    try:
        restore(run, snap, {}, None)
        rec.boxes = _boxes_of(t, snap)
        for v in run.inbox.pop(j, {}).values():
            await _close(v)
        rec.boxes.pop(j, None)
        if j in run.ready:
            run.ready.remove(j)
        if j in run.resume_for:
            del run.resume_for[j]
        if state is not None:
            _patch_state(run, state, where)
        await run._finish(j, _one(output) if run.streaming else output)
        if not t.dag:
            run.steps += 1
        rec.count = step + 1
        if t.end in (run.ready if t.dag else run.inbox):  # routed to END (which wins): the run ends here
            end = take_dag(run, t.end) if t.dag else run._take(t.end)
            plain, _ = await run._plain_of(t.end, end)
            written = await rec.write_final(run, plain, rec.dump_outputs([j]))
        else:
            written = await rec.write(run, step + 1, rec.dump_outputs([j]))
    finally:
        run._exit(tokens)
        await run._close_all()
    data = await store.get(history_key(written.checkpoint_id, written.branch, written.step))
    assert data is not None
    return to_state(*decode_record(data, t.fingerprint))


def _patch_state(run: GraphRun, patch: Mapping[str, Any], where: str) -> None:
    t = run.t
    if run.frame is None:
        raise StateUpdateError(f"{where}: graph '{t.name}' has no state to patch")
    bad = [k for k in patch if not isinstance(k, str)] if isinstance(patch, Mapping) else None
    if bad is None or bad:
        got = type(patch).__qualname__ if bad is None else f"the key(s) {bad!r}"
        raise StateUpdateError(
            f"{where}: state= must be a mapping of field names (str) to values, a patch of the state of graph "
            f"'{t.name}'; got {got}"
        )
    current = dump_value(t.state_type, run.frame.state, f"the state of graph '{t.name}'")
    if not isinstance(current, dict):
        raise StateUpdateError(f"{where}: the state of graph {t.name!r} is not a record of fields to patch")
    unknown = [k for k in patch if k not in current]
    if unknown:
        raise StateUpdateError(
            f"{where}: the state of graph '{t.name}' has no field(s) {unknown} (fields: {sorted(current)})"
        )
    try:
        run.frame.state = load_value(t.state_type, {**current, **dict(patch)})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise StateUpdateError(
            f"{where}: the state patch does not fit {type_name(t.state_type)} ({loc}: {err['msg']})"
        ) from exc
