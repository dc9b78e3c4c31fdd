"""What packages built on compose use (pyeino's ``adk``, your own stores, agents and stream adapters): public and
kept stable, but not what an application reaches for first (that is the ``compose`` root). As ``trio.lowlevel``.

Each name is defined in a private module of compose; this is its public home, so that ``adk`` imports nothing
private from compose::

    streams      ReaderRelay, MapReader, copies_of_own          (compose.stream)
    prompts      format_fstring                                 (compose.prompt)
    tools        MessageOutput                                  (compose.tools.middleware)
    checkpoints  release_claim, release_claim_after, retire_claim   (compose.checkpoint's claims)
    SQL stores   ClosingStore, check_table_name, LeaseKeeper, holder_name, SQLiteDatabase, PostgresDatabase,
                 require_psycopg                                (the plumbing of compose's and adk's stores)
    packaging    lazy_names                                     (a package's names imported on first use)
"""

from compose._db.keeper import LeaseKeeper, holder_name
from compose._db.postgres import PostgresDatabase, require_psycopg
from compose._db.sqlite import SQLiteDatabase
from compose._db.store import ClosingStore, check_table_name
from compose._lazy import lazy_names
from compose.checkpoint._protocol import _release_claim as release_claim
from compose.checkpoint._protocol import _release_claim_after as release_claim_after
from compose.checkpoint._protocol import _retire as retire_claim
from compose.prompt._formats import format_fstring
from compose.stream._copy import MapReader, copies_of_own
from compose.stream._core import ReaderRelay
from compose.tools.middleware import _MessageOutput as MessageOutput

__all__ = [
    "ClosingStore",
    "LeaseKeeper",
    "MapReader",
    "MessageOutput",
    "PostgresDatabase",
    "ReaderRelay",
    "SQLiteDatabase",
    "check_table_name",
    "copies_of_own",
    "format_fstring",
    "holder_name",
    "lazy_names",
    "release_claim",
    "release_claim_after",
    "require_psycopg",
    "retire_claim",
]
