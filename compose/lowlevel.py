"""What packages built on compose use (pyeino's ``adk``, your own stores, agents and stream adapters): public and
kept stable, but not what an application reaches for first. As ``trio.lowlevel``: each name is defined in a
private module of compose (streams, prompts, tools, checkpoint claims, the SQL stores' plumbing, lazy package
names) and this is its public home, so that ``adk`` imports nothing private from compose.
"""

from compose._db.core import Conn, Dialect, SqlStore, quote
from compose._db.keeper import LeaseKeeper, holder_name
from compose._db.postgres import PostgresDialect, require_psycopg
from compose._db.sqlite import SQLiteDialect
from compose._db.store import Closing, ClosingStore, check_table_name
from compose._lazy import lazy_names
from compose.checkpoint._protocol import _release_claim as release_claim
from compose.checkpoint._protocol import _release_claim_after as release_claim_after
from compose.checkpoint._protocol import _retire as retire_claim
from compose.prompt._formats import format_fstring
from compose.stream._copy import MapReader, copies_of_own, ready_mapped
from compose.stream._core import ReaderRelay
from compose.tools.middleware import _MessageOutput as MessageOutput

__all__ = [
    "Closing",
    "ClosingStore",
    "Conn",
    "Dialect",
    "LeaseKeeper",
    "MapReader",
    "MessageOutput",
    "PostgresDialect",
    "ReaderRelay",
    "SQLiteDialect",
    "SqlStore",
    "check_table_name",
    "copies_of_own",
    "format_fstring",
    "holder_name",
    "lazy_names",
    "quote",
    "ready_mapped",
    "release_claim",
    "release_claim_after",
    "require_psycopg",
    "retire_claim",
]
