"""Resume reliability (issue 13; issue 12 point 4): resume data never starts a fresh run, unknown interrupt ids,
store failures at the end of a resumed run, checkpoints that no longer fit the graph, cancellable SQLite lock
waits, and stores with only Eino's get/set."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from compose import CheckpointNotFoundError as ExportedNotFound
from compose import InterruptNotFoundError as ExportedUnknown
from compose.checkpoint import (
    InMemoryCheckPointStore,
    SQLiteCheckPointStore,
    encode_checkpoint,
    prune,
    read_checkpoint_header,
)
from compose.checkpoint._snapshot import RunSnapshot
from compose.errors import (
    CheckpointClaimedError,
    CheckpointError,
    CheckpointNotFoundError,
    CheckpointStoreError,
    GraphBuildError,
    GraphInterrupt,
    InterruptNotFoundError,
)
from compose.graph import END, START, Graph
from compose.interrupt import get_resume_context, interrupt
from compose.runnable import Runnable
from compose.state import process_state
from tests.stores import retired

pytestmark = pytest.mark.anyio


@dataclass
class St:
    log: list[str] = field(default_factory=list)


class Effects:
    """A graph START -> a -> ask -> b -> END whose nodes record every execution; ``ask`` interrupts until it is
    resumed with data."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def graph(self, state: Any = St, tail: Any = None) -> Graph[str, str]:
        async def a(x: str) -> str:
            self.ran.append("a")
            return x + "a"

        async def ask(x: str) -> str:
            ctx = get_resume_context()
            if not ctx.has_data:
                raise interrupt("approve?")
            self.ran.append(f"ask:{ctx.data}")
            return f"{x}[{ctx.data}]"

        async def b(x: str) -> str:
            self.ran.append("b")
            return x + "b"

        g = Graph[str, str](state=state)
        prev = START
        for key, fn in (("a", a), ("ask", ask), ("b", b), ("tail", tail)):
            if fn is not None:
                g.add_lambda_node(key, fn)
                g.add_edge(prev, key)
                prev = key
        g.add_edge(prev, END)
        return g


async def pause(r: Runnable[str, str], checkpoint_id: str = "k") -> str:
    """Run until ``ask`` interrupts; return its interrupt id."""
    with pytest.raises(GraphInterrupt) as info:
        await r.invoke(">", checkpoint_id=checkpoint_id)
    (ctx,) = info.value.info.interrupt_contexts
    return str(ctx.id)


# ---------------------------------------------------------------------------------------------------------------
# 1. Resume data needs its checkpoint; interrupt ids must be the checkpoint's


async def test_resuming_a_finished_run_again_is_not_found_and_runs_nothing(anyio_backend: Any) -> None:
    fx = Effects()
    store = InMemoryCheckPointStore()
    r = fx.graph().compile(checkpoint_store=store)
    ask_id = await pause(r)
    assert await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"}) == "[yes]b"
    assert fx.ran == ["a", "ask:yes", "b"] and await store.list() == []
    with pytest.raises(CheckpointNotFoundError, match=r"checkpoint\[k\] not exist") as info:
        await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
    assert info.value.reason == "not_found" and info.value.checkpoint_id == "k"
    assert isinstance(info.value, LookupError) and isinstance(info.value, CheckpointError)
    assert fx.ran == ["a", "ask:yes", "b"]  # nothing ran again
    assert await store.list() == []  # and no new checkpoint was written
    assert ExportedNotFound is CheckpointNotFoundError and ExportedUnknown is InterruptNotFoundError


async def test_resume_data_for_an_id_never_written_is_not_found(anyio_backend: Any) -> None:
    fx = Effects()
    store = InMemoryCheckPointStore()
    r = fx.graph().compile(checkpoint_store=store)
    for paradigm in ("invoke", "stream"):
        with pytest.raises(CheckpointNotFoundError, match=r"checkpoint\[never\] not exist; resume data \['x'\]"):
            if paradigm == "invoke":
                await r.invoke(">", checkpoint_id="never", resume={"x": 1})
            else:
                await r.stream(">", checkpoint_id="never", resume={"x": 1})
    assert fx.ran == [] and await store.list() == []
    # without resume data an unknown id is a fresh run that saves its pause there (Eino's rule)
    await pause(r, "never")
    assert fx.ran == ["a"] and await store.list() == ["never"]


async def test_an_unknown_interrupt_id_is_refused_naming_the_ids_the_checkpoint_has(anyio_backend: Any) -> None:
    fx = Effects()
    store = InMemoryCheckPointStore()
    r = fx.graph().compile(checkpoint_store=store)
    ask_id = await pause(r)
    with pytest.raises(InterruptNotFoundError) as info:
        await r.invoke("", checkpoint_id="k", resume={"bogus": "yes", ask_id: "yes"})
    err = info.value
    assert err.reason == "unknown_interrupt" and err.unknown == ["bogus"] and err.known == [ask_id]
    assert "['bogus'] are not among its interrupt ids" in str(err) and ask_id in str(err)
    assert isinstance(err, ValueError)
    assert fx.ran == ["a"]  # nothing ran
    # the checkpoint is untouched and not left claimed
    assert await r.invoke("", checkpoint_id="k", resume={ask_id: "ok"}) == "[ok]b"


async def test_ids_inside_a_paused_sub_graph_are_known(anyio_backend: Any) -> None:
    fx = Effects()
    inner = fx.graph(state=None)
    outer = Graph[str, str]()
    outer.add_graph_node("sub", inner)
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    r = outer.compile(name="outer", checkpoint_store=InMemoryCheckPointStore())
    ask_id = await pause(r)
    with pytest.raises(InterruptNotFoundError) as info:
        await r.invoke("", checkpoint_id="k", resume={"nope": 1})
    assert info.value.known == [ask_id]
    assert await r.invoke("", checkpoint_id="k", resume={ask_id: "in"}) == "[in]b"


# ---------------------------------------------------------------------------------------------------------------
# 2. A store failure at the end of a resumed run


class FailingDelete(InMemoryCheckPointStore):
    """An in-memory store whose delete fails while ``broken`` (as a database that went away would)."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    async def delete(self, checkpoint_id: str) -> None:
        if self.broken:
            raise ConnectionError("server closed the connection")
        await super().delete(checkpoint_id)


async def test_a_failing_delete_is_reported_once_and_keeps_the_claim(anyio_backend: Any) -> None:
    fx = Effects()
    store = FailingDelete()
    r = fx.graph().compile(checkpoint_store=store)
    ask_id = await pause(r)
    with pytest.raises(CheckpointStoreError, match="the resumed run completed, but its checkpoint 'k' could not") as e:
        await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
    assert isinstance(e.value.__cause__, ConnectionError)
    assert "it stays claimed by this run" in str(e.value)
    assert fx.ran == ["a", "ask:yes", "b"]
    assert await store.list() == ["k"]  # still stored ...
    store.broken = False
    with pytest.raises(CheckpointClaimedError):  # ... and never resumed as if the run had not completed
        await r.invoke("", checkpoint_id="k", resume={ask_id: "again"})
    assert fx.ran == ["a", "ask:yes", "b"]
    await store.delete("k")  # what the error says to do
    assert await store.list() == []


@contextmanager
def write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the write lock of the SQLite file at ``path`` (as another process's long transaction would)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield db
    finally:
        if db.in_transaction:
            db.execute("COMMIT")
        db.close()


async def test_a_locked_sqlite_file_at_the_end_of_a_resume_is_reported_once(anyio_backend: Any, tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    fx = Effects()
    lock: list[sqlite3.Connection] = []

    async def grab(x: str) -> str:  # runs (once) after the resume claimed its checkpoint
        if not lock:
            lock.append(sqlite3.connect(path, isolation_level=None))
            lock[0].execute("BEGIN IMMEDIATE")
        return x

    g = fx.graph(tail=grab)
    async with SQLiteCheckPointStore(path, busy_timeout=0.2) as store:
        r = g.compile(checkpoint_store=store)
        ask_id = await pause(r)
        with pytest.raises(CheckpointStoreError, match="could not be deleted") as e:
            await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})
        assert "the store retries the delete until it works again" in str(e.value)
        assert not getattr(e.value, "__notes__", [])  # no release was tried: the claim is the retry's
        lock[0].execute("COMMIT")
        lock[0].close()
        await retired(store._keeper, "k")  # the keeper deleted it once the file was free
        assert await store.list() == []
        assert fx.ran == ["a", "ask:yes", "b"]


# ---------------------------------------------------------------------------------------------------------------
# 3. A checkpoint that no longer fits the graph


async def test_a_changed_state_type_is_a_fingerprint_error_naming_the_state(anyio_backend: Any) -> None:
    store = InMemoryCheckPointStore()
    ask_id = await pause(Effects().graph(St).compile(checkpoint_store=store))
    same_name = dataclasses.make_dataclass("St", [("log", int, 0)])  # another shape
    other = dataclasses.make_dataclass("Other", [("log", list[str], field(default_factory=list))])
    for state in (same_name, other):
        with pytest.raises(CheckpointError, match="its state type changed since the run paused") as info:
            await Effects().graph(state).compile(checkpoint_store=store).invoke(
                "", checkpoint_id="k", resume={ask_id: "x"}
            )
        assert info.value.reason == "fingerprint"
    assert await store.list() == ["k"]  # refused before anything ran, and not left claimed
    assert await store.claim("k", "probe")


async def test_a_changed_sub_graph_is_a_fingerprint_error(anyio_backend: Any) -> None:
    def outer(state: Any) -> Graph[str, str]:
        g = Graph[str, str]()
        g.add_graph_node("sub", Effects().graph(state))
        g.add_edge(START, "sub")
        g.add_edge("sub", END)
        return g

    store = InMemoryCheckPointStore()
    ask_id = await pause(outer(St).compile(checkpoint_store=store))
    with pytest.raises(CheckpointError, match="its sub-graphs changed") as info:
        await outer(None).compile(checkpoint_store=store).invoke("", checkpoint_id="k", resume={ask_id: "x"})
    assert info.value.reason == "fingerprint"


async def rewrite(store: InMemoryCheckPointStore, change: Any) -> None:
    """Rewrite the payload of checkpoint 'k' with ``change`` and a fresh (valid) digest."""
    data = await store.get("k")
    assert data is not None
    payload = json.loads(data.partition(b"\n")[2])
    change(payload)
    fp = read_checkpoint_header(data).fingerprint
    await store.set("k", encode_checkpoint(RunSnapshot.model_validate(payload), kind="graph-run", fingerprint=fp))


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (lambda p: p.update(state={"log": 5}), "the state is not a St"),
        (lambda p: p.update(state=None, has_state=False), "the state is missing"),
        (lambda p: p["reruns"][0].update(key="zz"), "an interrupted node names node 'zz'"),
        (lambda p: p.update(pending=[["a", 42]]), "the output of node 'a' is not a str"),
        (lambda p: p.update(inbox={"b": {"nope": "x"}}), "names node 'nope'"),
        (lambda p: p.update(ready=["ghost"]), "the ready nodes names node 'ghost'"),
    ],
)
async def test_a_payload_with_a_valid_digest_that_does_not_fit_names_the_part(
    anyio_backend: Any, change: Any, names: str
) -> None:
    fx = Effects()
    store = InMemoryCheckPointStore()
    r = fx.graph().compile(name="G", checkpoint_store=store)
    ask_id = await pause(r)
    await rewrite(store, change)
    with pytest.raises(CheckpointError, match="checkpoint 'k' does not fit graph 'G'") as info:
        await r.invoke("", checkpoint_id="k", resume={ask_id: "x"})
    assert info.value.reason == "payload" and names in str(info.value)
    assert fx.ran == ["a"]
    assert await store.claim("k", "probe")  # released


# ---------------------------------------------------------------------------------------------------------------
# 6. Waiting for a locked SQLite file is cancellable


async def test_cancelling_a_resume_waiting_on_a_locked_sqlite_file_returns_promptly(
    anyio_backend: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cp.db"
    fx = Effects()
    async with SQLiteCheckPointStore(path, busy_timeout=20) as store:
        r = fx.graph().compile(checkpoint_store=store)
        ask_id = await pause(r)
        with write_lock(path):
            async with anyio.create_task_group() as tg:

                async def resume() -> None:
                    await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"})

                tg.start_soon(resume)
                await anyio.wait_all_tasks_blocked()
                started = anyio.current_time()
                tg.cancel_scope.cancel()
            assert anyio.current_time() - started < 3  # the lock's 20 s are not waited out
        # the connection is fine afterwards, and the checkpoint was never claimed
        assert await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"}) == "[yes]b"
        assert fx.ran == ["a", "ask:yes", "b"]


async def test_a_lock_held_past_busy_timeout_is_a_store_error(anyio_backend: Any, tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    async with SQLiteCheckPointStore(path, busy_timeout=0.1) as store:
        await store.set("k", b"x")
        with write_lock(path), pytest.raises(CheckpointStoreError, match=r"still locked .* busy_timeout=0.1s"):
            await store.set("k", b"y")
        await store.set("k", b"z")
        assert await store.get("k") == b"z"


async def test_a_short_lock_is_waited_for(anyio_backend: Any, tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    async with SQLiteCheckPointStore(path, busy_timeout=30) as store:
        await store.set("k", b"x")
        with write_lock(path) as db:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.set, "k", b"y")
                await anyio.wait_all_tasks_blocked()
                db.execute("COMMIT")
        assert await store.get("k") == b"y"


# ---------------------------------------------------------------------------------------------------------------
# Issue 12, point 4: stores with only Eino's get/set; stores missing what a feature needs


class EinoStore:
    """Eino's CheckPointStore interface only: get and set."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data


async def test_a_get_set_store_pauses_and_resumes_and_keeps_the_checkpoint(anyio_backend: Any) -> None:
    fx = Effects()
    store = EinoStore()
    r = fx.graph().compile(checkpoint_store=store)
    ask_id = await pause(r)
    assert await r.invoke("", checkpoint_id="k", resume={ask_id: "yes"}) == "[yes]b"
    assert list(store.data) == ["k"]  # no delete: kept, as in Eino
    with pytest.raises(TypeError, match=r"prune\(\) needs a store with list\(\) and delete\(\); EinoStore lacks list"):
        await prune(store)


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ({"get"}, r"Store is not a checkpoint store: it lacks set\(\)"),
        (set(), r"it lacks get\(\), set\(\)"),
        ({"get", "set", "claim"}, r"has claim\(\) but lacks release\(\)"),
        ({"get", "set", "release"}, r"has release\(\) but lacks claim\(\)"),
    ],
)
def test_compile_rejects_a_store_missing_what_a_feature_needs(methods: set[str], message: str) -> None:
    async def method(*args: Any, **kwargs: Any) -> Any:
        return None

    store = type("Store", (), dict.fromkeys(methods, method))()
    with pytest.raises(GraphBuildError, match=r"compile\(checkpoint_store=\.\.\.\): .*" + message):
        Effects().graph().compile(checkpoint_store=store)


async def test_an_unchanged_state_type_resumes_in_a_fresh_compile(anyio_backend: Any) -> None:
    """The fingerprint covers the state type's schema, which is the same for every compile of one graph."""

    async def show(x: str) -> str:
        async with process_state(St) as st:
            return x + ",".join(st.log)

    def graph() -> Graph[str, str]:
        g = Graph[str, str](state=St)

        async def note(x: str) -> str:
            async with process_state(St) as st:
                st.log.append("noted")
            return x

        g.add_lambda_node("note", note)
        g.add_lambda_node("show", show)
        g.add_edge(START, "note")
        g.add_edge("note", "show")
        g.add_edge("show", END)
        return g

    store = InMemoryCheckPointStore()
    with pytest.raises(GraphInterrupt):
        await graph().compile(interrupt_before=["show"], checkpoint_store=store).invoke(">", checkpoint_id="k")
    assert await graph().compile(interrupt_before=["show"], checkpoint_store=store).invoke("", checkpoint_id="k") == (
        ">noted"
    )
