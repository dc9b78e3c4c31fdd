"""Writes a run's history into SQLite or PostgreSQL and exits: ``history_worker.py sqlite|postgres <path|dsn> <table>``.

The test reads the history back in its own process (``test_history.py``), with the same graph (``build``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import anyio

from compose.checkpoint import PostgresCheckPointStore, SQLiteCheckPointStore
from compose.graph import END, START, Graph
from compose.state import process_state


@dataclass
class Log:
    seen: list[str] = field(default_factory=list)


def build(store: Any) -> Any:
    """START -> n1 -> ... -> n5 -> END; each node appends its key to the text and to the state."""
    g = Graph[str, str](state=Log)
    prev = START
    for i in range(1, 6):
        key = f"n{i}"

        async def node(x: str, key: str = key) -> str:
            async with process_state(Log) as st:
                st.seen.append(key)
            return f"{x}{key[-1]}"

        g.add_lambda_node(key, node)
        g.add_edge(prev, key)
        prev = key
    g.add_edge(prev, END)
    return g.compile(name="restart", checkpoint_store=store, keep_history=True)


def open_store(kind: str, where: str, table: str) -> Any:
    if kind == "sqlite":
        return SQLiteCheckPointStore(where)
    return PostgresCheckPointStore(where, table=table, max_size=2)


async def main(kind: str, where: str, table: str) -> None:
    async with open_store(kind, where, table) as store:
        out = await build(store).invoke(">", checkpoint_id="run-1")
    print(json.dumps(out))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
