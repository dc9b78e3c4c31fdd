"""Checkpoint stores (memory, SQLite, PostgreSQL), claims, retention and the checkpoint envelope."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from compose.checkpoint import (
    CHECKPOINT_KEY_ENV,
    CheckpointError,
    CheckpointHeader,
    CheckPointStore,
    CheckpointStoreError,
    ClaimableCheckPointStore,
    InMemoryCheckPointStore,
    PostgresCheckPointStore,
    SQLiteCheckPointStore,
    claim_checkpoint,
    decode_checkpoint,
    encode_checkpoint,
    prune,
    read_checkpoint_header,
)
from compose.schema import FunctionCall, Message, ToolCall, assistant_message, tool_message, user_message
from tests.compose.pg_server import PgServer
from tests.stores import STORE_KINDS, checkpoint_store, drop_checkpoint_table, pg_table

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture
async def pg_store(pg_server: PgServer) -> AsyncIterator[PostgresCheckPointStore]:
    table = pg_table("cp_test")
    async with PostgresCheckPointStore(pg_server.dsn, table=table, max_size=4) as store:
        yield store
    await anyio.to_thread.run_sync(drop_checkpoint_table, pg_server.dsn, table)


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ClaimableCheckPointStore]:
    async with checkpoint_store(request, tmp_path) as s:
        yield s


class DictStore:
    """A user's store with only the four required methods (no claims)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    async def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data

    async def delete(self, checkpoint_id: str) -> None:
        self.data.pop(checkpoint_id, None)

    async def list(self, prefix: str = "") -> list[str]:
        return [k for k in self.data if k.startswith(prefix)]


# ---------------------------------------------------------------------------------------------------------------
# The store contract, for every store


async def test_missing_id_is_none(store: ClaimableCheckPointStore) -> None:
    assert await store.get("nope") is None
    assert await store.list() == []


async def test_bytes_round_trip(store: ClaimableCheckPointStore) -> None:
    every_byte = bytes(range(256)) * 4
    big = os.urandom(1 << 20)
    await store.set("all", every_byte)
    await store.set("empty", b"")
    await store.set("big", big)
    await store.set("bytearray", bytearray(b"\x00\xff"))  # type: ignore[arg-type]
    assert await store.get("all") == every_byte
    assert await store.get("empty") == b""
    assert await store.get("big") == big
    got = await store.get("bytearray")
    assert got == b"\x00\xff"
    assert type(got) is bytes


async def test_overwrite_replaces_and_moves_to_newest(store: ClaimableCheckPointStore) -> None:
    for key in ["a", "b", "c"]:
        await store.set(key, key.encode())
    await store.set("a", b"second")
    assert await store.get("a") == b"second"
    assert await store.list() == ["b", "c", "a"]


async def test_delete(store: ClaimableCheckPointStore) -> None:
    await store.set("a", b"1")
    await store.set("b", b"2")
    await store.delete("a")
    await store.delete("a")  # deleting a missing id is not an error
    await store.delete("never")
    assert await store.get("a") is None
    assert await store.get("b") == b"2"
    assert await store.list() == ["b"]


async def test_list_by_prefix_is_literal(store: ClaimableCheckPointStore) -> None:
    ids = ["run/1", "run/2", "runner/1", "ru%n/1", "run_x", "ru_/1", "rûn/é", "r", "sess\\1", "sess\\\\2"]
    for i in ids:
        await store.set(i, b"x")
    assert await store.list("run/") == ["run/1", "run/2"]
    assert await store.list("run") == ["run/1", "run/2", "runner/1", "run_x"]
    assert await store.list("ru%") == ["ru%n/1"]
    assert await store.list("ru_") == ["ru_/1"]
    assert await store.list("rû") == ["rûn/é"]
    assert await store.list("sess\\") == ["sess\\1", "sess\\\\2"]
    assert await store.list("zzz") == []
    assert await store.list() == ids
    assert await store.list("") == ids


async def test_claim_semantics(store: ClaimableCheckPointStore) -> None:
    assert await store.claim("cp", "a") is False  # nothing to claim
    await store.set("cp", b"data")
    assert await store.claim("cp", "a") is True
    assert await store.claim("cp", "a") is True  # idempotent for the holder
    assert await store.claim("cp", "b") is False
    assert await store.claim("cp", "b", stale_after=3600) is False  # a fresh claim is live
    assert await store.release("cp", "b") is False  # not b's to release
    assert await store.release("cp", "a") is True
    assert await store.release("cp", "a") is False
    assert await store.claim("cp", "b") is True
    assert await store.get("cp") == b"data"  # claims do not touch the data

    await store.set("cp", b"new")  # a write makes it resumable by anyone
    assert await store.claim("cp", "c") is True
    assert await store.claim("cp", "d", stale_after=-1) is True  # takes over a stale claim
    assert await store.claim("cp", "c") is False
    await store.delete("cp")
    assert await store.claim("cp", "d") is False
    await store.set("cp", b"again")
    assert await store.claim("cp", "c") is True  # the old claim went with the delete


async def test_concurrent_claimers_exactly_one_wins(store: ClaimableCheckPointStore, no_task_leaks: None) -> None:
    await store.set("cp", b"data")
    go = anyio.Event()
    results: dict[str, bool] = {}

    async def claimer(owner: str) -> None:
        await go.wait()
        results[owner] = await store.claim("cp", owner)

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(claimer, f"w{i}")
        await anyio.wait_all_tasks_blocked()
        go.set()
    winners = [owner for owner, won in results.items() if won]
    assert len(results) == 12
    assert len(winners) == 1
    assert await store.release("cp", winners[0]) is True


async def test_claim_checkpoint_hands_bytes_to_one_resumer(store: ClaimableCheckPointStore) -> None:
    assert await claim_checkpoint(store, "cp", "a") is None  # no checkpoint: a fresh run
    await store.set("cp", b"snapshot")
    assert await claim_checkpoint(store, "cp", "a") == b"snapshot"
    with pytest.raises(CheckpointError, match="being resumed by another run") as info:
        await claim_checkpoint(store, "cp", "b")
    assert info.value.reason == "claimed"
    assert await claim_checkpoint(store, "cp", "b", stale_after=-1) == b"snapshot"


async def test_prune_keeps_the_newest(store: ClaimableCheckPointStore) -> None:
    for i in range(5):
        await store.set(f"s1/{i}", b"x")
    await store.set("s2/0", b"x")
    await store.set("s1/0", b"rewritten")  # now the newest of s1
    assert await prune(store, "s1/", keep_latest=2) == 3
    assert await store.list() == ["s1/4", "s2/0", "s1/0"]
    assert await prune(store, "s1/", keep_latest=5) == 0
    assert await prune(store) == 3
    assert await store.list() == []
    with pytest.raises(ValueError, match="keep_latest must be >= 0"):
        await prune(store, keep_latest=-1)


async def test_stores_implement_the_protocols(store: ClaimableCheckPointStore) -> None:
    assert isinstance(store, CheckPointStore)
    assert isinstance(store, ClaimableCheckPointStore)
    assert isinstance(DictStore(), CheckPointStore)
    assert not isinstance(DictStore(), ClaimableCheckPointStore)


async def test_store_without_claims() -> None:
    plain = DictStore()
    assert await claim_checkpoint(plain, "cp", "a") is None
    await plain.set("cp", b"x")
    assert await claim_checkpoint(plain, "cp", "a") == b"x"
    assert await claim_checkpoint(plain, "cp", "b") == b"x"  # no exclusivity without claims
    assert await prune(plain) == 1


async def test_cancelled_call_leaves_store_usable(store: ClaimableCheckPointStore, no_task_leaks: None) -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await store.set("cp", b"x")
    assert scope.cancelled_caught
    await store.set("cp", b"y")
    assert await store.get("cp") == b"y"


# ---------------------------------------------------------------------------------------------------------------
# Store specifics


async def test_in_memory_repr() -> None:
    store = InMemoryCheckPointStore()
    await store.set("a", b"1")
    await store.set("b", b"2")
    await store.claim("a", "me")
    assert repr(store) == "<InMemoryCheckPointStore checkpoints=2 claimed=1>"
    async with store:
        pass


async def test_sqlite_persists_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    store = SQLiteCheckPointStore(path, table="runs")
    assert repr(store) == f"<SQLiteCheckPointStore {str(path)!r} table=runs not yet opened>"
    await store.set("a", b"1")
    assert repr(store) == f"<SQLiteCheckPointStore {str(path)!r} table=runs open>"
    await store.aclose()
    assert repr(store) == f"<SQLiteCheckPointStore {str(path)!r} table=runs closed>"
    with pytest.raises(anyio.ClosedResourceError):
        await store.get("a")
    async with SQLiteCheckPointStore(path, table="runs") as again:
        assert await again.get("a") == b"1"
    async with SQLiteCheckPointStore(path, table="other") as other:  # tables share a file independently
        assert await other.list() == []


def test_table_names_are_checked(tmp_path: Path) -> None:
    for bad in ["Runs", "1runs", "runs; DROP TABLE x", "", "a-b"]:
        with pytest.raises(ValueError, match="must be lower-case letters"):
            SQLiteCheckPointStore(tmp_path / "x.db", table=bad)
        with pytest.raises(ValueError, match="must be lower-case letters"):
            PostgresCheckPointStore("postgresql://localhost/x", table=bad)


async def test_sqlite_database_errors_are_store_errors(tmp_path: Path) -> None:
    async with SQLiteCheckPointStore(tmp_path) as store:  # a directory, not a database file
        with pytest.raises(CheckpointStoreError, match="SQLite checkpoint store") as info:
            await store.get("a")
    assert info.value.__cause__ is not None


_WRITER = """
import sys, anyio
from compose.checkpoint import SQLiteCheckPointStore

async def main(path, n):
    async with SQLiteCheckPointStore(path) as store:
        for i in range(n):
            await store.set(f"w/{i:04d}", bytes([i % 256]) * (2000 + i))

anyio.run(main, sys.argv[1], int(sys.argv[2]))
"""


async def test_sqlite_shared_by_two_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    n = 150
    expected = [f"w/{i:04d}" for i in range(n)]
    reads = 0
    async with SQLiteCheckPointStore(path) as store:
        await store.set("reader/0", b"mine")  # the reader creates the file and table first
        done = anyio.Event()

        async def writer() -> None:
            await anyio.run_process([sys.executable, "-c", _WRITER, path, str(n)], cwd=ROOT)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            while not done.is_set():
                ids = await store.list("w/")
                assert ids == expected[: len(ids)]  # never a gap, never out of order
                if ids:
                    i = len(ids) - 1
                    assert await store.get(ids[-1]) == bytes([i % 256]) * (2000 + i)  # never half written
                reads += 1
        assert await store.list("w/") == expected
        assert await store.list() == ["reader/0", *expected]
    assert reads >= 1


_CLAIMER = """
import sys, anyio
from compose.checkpoint import SQLiteCheckPointStore

async def main(path, owner):
    async with SQLiteCheckPointStore(path) as store:
        print(await store.claim("cp", owner))

anyio.run(main, sys.argv[1], sys.argv[2])
"""


async def test_sqlite_claim_across_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "claims.db")
    async with SQLiteCheckPointStore(path) as store:
        await store.set("cp", b"x")
    outputs: dict[str, str] = {}

    async def claimer(owner: str) -> None:
        proc = await anyio.run_process([sys.executable, "-c", _CLAIMER, path, owner], cwd=ROOT)
        outputs[owner] = proc.stdout.decode().strip()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(claimer, f"proc{i}")
    assert sorted(outputs.values()) == ["False", "False", "True"]
    winner = next(owner for owner, out in outputs.items() if out == "True")
    async with SQLiteCheckPointStore(path) as store:
        assert await store.release("cp", winner) is True


async def test_postgres_two_pools_one_claim_winner(pg_server: PgServer) -> None:
    table = pg_table("cp_test")
    try:
        async with (
            PostgresCheckPointStore(pg_server.dsn, table=table) as one,
            PostgresCheckPointStore(pg_server.dsn, table=table) as two,
        ):
            await one.set("cp", b"x")
            assert await two.get("cp") == b"x"
            results: list[bool] = []
            go = anyio.Event()

            async def claimer(s: PostgresCheckPointStore, owner: str) -> None:
                await go.wait()
                results.append(await s.claim("cp", owner))

            async with anyio.create_task_group() as tg:
                for i in range(6):
                    tg.start_soon(claimer, one if i % 2 else two, f"o{i}")
                await anyio.wait_all_tasks_blocked()
                go.set()
            assert sorted(results) == [False] * 5 + [True]
    finally:
        await anyio.to_thread.run_sync(drop_checkpoint_table, pg_server.dsn, table)


async def test_postgres_survives_server_restart(pg_own_server: PgServer) -> None:
    table = pg_table("cp_test")
    try:
        async with PostgresCheckPointStore(pg_own_server.dsn, table=table, max_size=4) as pg_store:
            await pg_store.set("before", b"1")
            await anyio.to_thread.run_sync(pg_own_server.restart)
            assert await pg_store.get("before") == b"1"  # the pooled connection died: reconnected
            await pg_store.set("after", b"2")
            assert await pg_store.list() == ["before", "after"]
    finally:
        await anyio.to_thread.run_sync(drop_checkpoint_table, pg_own_server.dsn, table)


async def test_postgres_repr_and_close(pg_server: PgServer, pg_store: PostgresCheckPointStore) -> None:
    assert repr(pg_store) == f"<PostgresCheckPointStore table={pg_store.table} not yet opened>"
    await pg_store.set("a", b"1")
    assert repr(pg_store).startswith(f"<PostgresCheckPointStore table={pg_store.table} open pool_size=")
    await pg_store.aclose()
    assert repr(pg_store) == f"<PostgresCheckPointStore table={pg_store.table} closed>"
    with pytest.raises(anyio.ClosedResourceError):
        await pg_store.get("a")


async def test_postgres_unreachable_server_is_a_store_error() -> None:
    pytest.importorskip("psycopg_pool", reason="psycopg-pool is not installed")
    # port 1 on localhost: nothing listens there
    async with PostgresCheckPointStore("postgresql://nobody@127.0.0.1:1/none", timeout=0.5) as store:
        with pytest.raises(CheckpointStoreError, match="PostgreSQL checkpoint store"):
            await store.get("a")


# ---------------------------------------------------------------------------------------------------------------
# The envelope


class RunSnapshot(BaseModel):
    step: int
    messages: list[Message]
    state: dict[str, Any]
    tool_results: dict[str, str]


class OtherSnapshot(BaseModel):
    step: str
    nodes: list[str]


def _snapshot() -> RunSnapshot:
    call = ToolCall(id="call_1", function=FunctionCall(name="search", arguments='{"q": "pyeino"}'))
    return RunSnapshot(
        step=7,
        messages=[user_message("hi"), assistant_message("", tool_calls=[call]), tool_message("found", "call_1")],
        state={"count": 3, "notes": ["a", "ü"], "nested": {"x": None}},
        tool_results={"call_1": "found"},
    )


def _edit_header(data: bytes, **changes: Any) -> bytes:
    line, _, body = data.partition(b"\n")
    header = json.loads(line)
    header.update(changes)
    return json.dumps(header).encode() + b"\n" + body


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHECKPOINT_KEY_ENV, raising=False)


def test_envelope_round_trip_is_json() -> None:
    snap = _snapshot()
    data = encode_checkpoint(snap, kind="graph-run", fingerprint="fp1")
    assert decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp1") == snap
    line, _, body = data.partition(b"\n")
    header = json.loads(line)  # plain JSON, no pickle anywhere
    assert sorted(header) == ["digest", "fingerprint", "format", "kind", "version", "written_at"]
    assert header["format"] == "pyeino-checkpoint"
    assert header["version"] == 1
    assert header["kind"] == "graph-run"
    assert header["fingerprint"] == "fp1"
    assert header["digest"].startswith("sha256:")
    assert len(header["digest"]) == len("sha256:") + 64
    assert json.loads(body) == snap.model_dump(mode="json")
    assert read_checkpoint_header(data) == CheckpointHeader.model_validate(header)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "no header line"),
        (b"garbage", "no header line"),
        (b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00}\x94.\n", "the header is not JSON"),
        (b"[1, 2]\n{}", "the header does not name the pyeino-checkpoint format"),
        (b'{"format": "other"}\n{}', "the header does not name the pyeino-checkpoint format"),
        (b'{"format": "pyeino-checkpoint", "version": 1}\n{}', "malformed header: Field required"),
    ],
)
def test_rejects_bytes_that_are_not_a_checkpoint(data: bytes, why: str) -> None:
    with pytest.raises(CheckpointError) as info:
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp")
    assert info.value.reason == "not_checkpoint"
    assert str(info.value) == (
        f"not a pyeino checkpoint ({why}): the bytes were corrupted or written by something else; "
        "use force_new_run=True to start a fresh run, or delete the checkpoint"
    )


def test_rejects_truncated_checkpoint() -> None:
    data = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp")
    for cut in [10, data.index(b"\n"), len(data) - 5]:
        with pytest.raises(CheckpointError) as info:
            decode_checkpoint(data[:cut], RunSnapshot, kind="graph-run", fingerprint="fp")
        assert info.value.reason in {"not_checkpoint", "digest"}


def test_rejects_other_format_version() -> None:
    data = _edit_header(encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp"), version=2)
    with pytest.raises(CheckpointError, match=r"format version 2 is not supported \(this pyeino reads version 1\)"):
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp")
    with pytest.raises(CheckpointError) as info:
        read_checkpoint_header(data)
    assert info.value.reason == "version"


def test_rejects_other_kind() -> None:
    data = encode_checkpoint(_snapshot(), kind="agent-run", fingerprint="fp")
    with pytest.raises(CheckpointError, match="checkpoint holds a 'agent-run', not a 'graph-run'") as info:
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp")
    assert info.value.reason == "kind"


def test_rejects_foreign_fingerprint() -> None:
    data = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="abc")
    with pytest.raises(CheckpointError) as info:
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="def")
    assert info.value.reason == "fingerprint"
    assert str(info.value) == (
        "checkpoint was written by a different graph-run (fingerprint 'abc', this one is 'def'): its structure "
        "changed since the run was interrupted; resume with the graph-run that wrote it, or use "
        "force_new_run=True to start a fresh run, or delete the checkpoint"
    )


def test_rejects_tampered_payload_and_header() -> None:
    data = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp")
    tampered = [
        data.replace(b'"step":7', b'"step":8'),  # valid JSON, valid model, different value
        data[:-2] + bytes([data[-2] ^ 0x01]) + data[-1:],  # one flipped bit
        _edit_header(data, fingerprint="fp2").replace(b"fp2", b"fp"),  # re-serialised header, same values
        _edit_header(data, written_at=1.0),
    ]
    assert tampered[0] != data
    for bad in tampered[:2] + tampered[3:]:
        with pytest.raises(CheckpointError, match=r"digest mismatch \(corrupted or tampered with\)") as info:
            decode_checkpoint(bad, RunSnapshot, kind="graph-run", fingerprint="fp")
        assert info.value.reason == "digest"
    # the same values written with other whitespace still check out
    assert decode_checkpoint(tampered[2], RunSnapshot, kind="graph-run", fingerprint="fp") == _snapshot()
    # a forged fingerprint is caught by the digest before the fingerprint check
    forged = _edit_header(data, fingerprint="other")
    with pytest.raises(CheckpointError) as info:
        decode_checkpoint(forged, RunSnapshot, kind="graph-run", fingerprint="other")
    assert info.value.reason == "digest"


def test_rejects_payload_failing_validation() -> None:
    data = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp")
    with pytest.raises(CheckpointError) as info:
        decode_checkpoint(data, OtherSnapshot, kind="graph-run", fingerprint="fp")
    assert info.value.reason == "payload"
    assert str(info.value) == (
        "checkpoint payload does not validate as OtherSnapshot: step: Input should be a valid string; "
        "nodes: Field required; it was written by an incompatible version of the code; use force_new_run=True "
        "to start a fresh run, or delete the checkpoint"
    )
    assert isinstance(info.value.__cause__, ValidationError)


class FiveFields(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int


def test_payload_errors_are_summarised() -> None:
    data = encode_checkpoint(OtherSnapshot(step="1", nodes=[]), kind="graph-run", fingerprint="fp")
    with pytest.raises(
        CheckpointError, match=r": a: Field required; b: Field required; c: Field required \(and 2 more\);"
    ):
        decode_checkpoint(data, FiveFields, kind="graph-run", fingerprint="fp")


def test_hmac_key() -> None:
    snap = _snapshot()
    data = encode_checkpoint(snap, kind="graph-run", fingerprint="fp", key=b"secret")
    assert json.loads(data.partition(b"\n")[0])["digest"].startswith("hmac-sha256:")
    assert decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp", key="secret") == snap
    with pytest.raises(CheckpointError, match=r"digest mismatch \(wrong key, or the checkpoint was tampered with\)"):
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp", key=b"other")
    with pytest.raises(CheckpointError, match="signed \\(HMAC\\) but no key is configured: set PYEINO_CHECKPOINT_KEY"):
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp")
    # stripping the signature for a plain digest is refused when a key is configured
    unsigned = encode_checkpoint(snap, kind="graph-run", fingerprint="fp")
    with pytest.raises(CheckpointError, match="not signed but a key is configured") as info:
        decode_checkpoint(unsigned, RunSnapshot, kind="graph-run", fingerprint="fp", key=b"secret")
    assert info.value.reason == "digest"


def test_hmac_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "env-secret")
    data = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp")
    assert decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp", key=b"env-secret") == _snapshot()
    assert decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp") == _snapshot()
    monkeypatch.setenv(CHECKPOINT_KEY_ENV, "rotated")
    with pytest.raises(CheckpointError, match="wrong key"):
        decode_checkpoint(data, RunSnapshot, kind="graph-run", fingerprint="fp")


class Opaque:
    pass


class Loose(BaseModel):
    value: Any
    count: int


def test_unserialisable_payload_is_refused() -> None:
    with pytest.raises(CheckpointError, match=r"the value at value \(Opaque\) cannot be serialised as JSON") as info:
        encode_checkpoint(Loose(value=Opaque(), count=1), kind="graph-run", fingerprint="fp")
    assert info.value.reason == "encode" and "Loose" not in str(info.value)  # where the value is, not the model
    wrong_type = Loose.model_construct(value=1, count="not an int")
    with pytest.raises(CheckpointError) as info:
        encode_checkpoint(wrong_type, kind="graph-run", fingerprint="fp")
    assert info.value.reason == "encode"


def test_checkpoint_error_is_a_compose_value_error() -> None:
    from compose.errors import ComposeError

    assert issubclass(CheckpointError, ComposeError)
    assert issubclass(CheckpointError, ValueError)
    assert issubclass(CheckpointStoreError, ComposeError)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


class Free(BaseModel):
    data: dict[str, Any]
    tags: list[str]


@settings(max_examples=60, deadline=None)
@given(data=st.dictionaries(st.text(max_size=8), json_values, max_size=5), tags=st.lists(st.text(), max_size=3))
def test_property_round_trip(data: dict[str, Any], tags: list[str]) -> None:
    payload = Free(data=data, tags=tags)
    encoded = encode_checkpoint(payload, kind="k", fingerprint="f")
    assert decode_checkpoint(encoded, Free, kind="k", fingerprint="f") == payload


_REFERENCE = encode_checkpoint(_snapshot(), kind="graph-run", fingerprint="fp")


@settings(max_examples=200, deadline=None)
@given(position=st.integers(0, len(_REFERENCE) - 1), flip=st.integers(1, 255))
def test_property_any_corruption_is_caught(position: int, flip: int) -> None:
    corrupted = bytearray(_REFERENCE)
    corrupted[position] ^= flip
    try:
        decoded = decode_checkpoint(bytes(corrupted), RunSnapshot, kind="graph-run", fingerprint="fp")
    except CheckpointError:
        return
    # a change that reads back as the very same checkpoint (e.g. a float written another way) is harmless
    assert decoded == _snapshot()
