"""What the checkpoint and session stores share besides their databases: closing with ``async with`` (as runs,
clients and models do), and the checks on the table names and claim lifetimes they are given."""

from __future__ import annotations

import re
from types import TracebackType
from typing import Self

__all__ = ["Closing", "ClosingStore", "check_claim_ttl", "check_table_name"]

_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_table_name(table: str) -> str:
    """Return ``table`` if it is a plain lower-case SQL identifier, else raise ValueError."""
    if not _TABLE_NAME.fullmatch(table):
        raise ValueError(f"table name {table!r} must be lower-case letters, digits and '_' (not starting with a digit)")
    return table


def check_claim_ttl(claim_ttl: float | None) -> float | None:
    """Return ``claim_ttl`` if it is None or a positive number of seconds, else raise ValueError."""
    if claim_ttl is not None and not claim_ttl > 0:
        raise ValueError(f"claim_ttl must be > 0 seconds or None, got {claim_ttl!r}")
    return claim_ttl


class Closing:
    """``async with x:`` closes ``x`` on exit with its ``aclose()`` (stores, runs, clients, models)."""

    __slots__ = ()

    async def aclose(self) -> None:
        """Release the resources (nothing by default)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


ClosingStore = Closing  # the stores' name for it (compose.lowlevel)
