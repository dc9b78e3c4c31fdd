"""The protocols of the retrieval components and the options of a retriever and an indexer call.

Every method is async and takes its per-call options as keyword arguments (a graph passes a node's
``node_options`` this way); an implementation raises ``TypeError`` for an option it does not know.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from compose.components.document import Document, Source

__all__ = [
    "DocumentTransformer",
    "Embedder",
    "Indexer",
    "IndexerOptions",
    "Loader",
    "Retriever",
    "RetrieverOptions",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors, one per text, all of the same dimension."""

    async def embed_strings(self, texts: Sequence[str], **opts: Any) -> list[list[float]]:
        """The embeddings of ``texts``, in order."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """Finds the documents relevant to a query; common options are :class:`RetrieverOptions`' fields."""

    async def retrieve(self, query: str, **opts: Any) -> list[Document]:
        """The documents relevant to ``query``, best first, each with its ``score()``."""
        ...


@runtime_checkable
class Indexer(Protocol):
    """Stores documents so that a retriever can find them; common options are :class:`IndexerOptions`' fields."""

    async def store(self, docs: Sequence[Document], **opts: Any) -> list[str]:
        """Store ``docs`` and return their ids, in order."""
        ...


@runtime_checkable
class Loader(Protocol):
    """Reads documents from a :class:`Source`."""

    async def load(self, source: Source, **opts: Any) -> list[Document]:
        """The documents ``source`` holds."""
        ...


@runtime_checkable
class DocumentTransformer(Protocol):
    """Turns documents into documents: splitting, filtering, enriching."""

    async def transform(self, docs: Sequence[Document], **opts: Any) -> list[Document]:
        """The transformed documents."""
        ...


_O = TypeVar("_O", "RetrieverOptions", "IndexerOptions")


def _merged(base: _O, opts: dict[str, Any], what: str) -> _O:
    names = {f.name for f in dataclasses.fields(base)}
    unknown = set(opts) - names
    if unknown:
        raise TypeError(f"unknown {what} option(s) {sorted(unknown)}; expected some of {sorted(names)}")
    changes = {k: v for k, v in opts.items() if v is not None}
    return dataclasses.replace(base, **changes) if changes else base


@dataclass(frozen=True, slots=True)
class RetrieverOptions:
    """The common options of a retrieve call (Eino's ``retriever.Options``); ``None`` means "not set".

    ``top_k``: at most this many documents; ``score_threshold``: only documents scoring at least this;
    ``sub_index``: only documents of this sub-index; ``index``: the index to search (implementation-defined);
    ``embedder``: embed the query with this instead of the retriever's own; ``dsl_info``: a query DSL.

    Example:
        >>> RetrieverOptions(top_k=4).merged(top_k=2, score_threshold=0.5)
        RetrieverOptions(index=None, sub_index=None, top_k=2, score_threshold=0.5, embedder=None, dsl_info=None)
    """

    index: str | None = None
    sub_index: str | None = None
    top_k: int | None = None
    score_threshold: float | None = None
    embedder: Embedder | None = None
    dsl_info: dict[str, Any] | None = None

    def merged(self, **opts: Any) -> RetrieverOptions:
        """These options overridden by ``opts`` (``None`` leaves a field as it is); ``TypeError`` on an unknown
        name."""
        return _merged(self, opts, "retriever")


@dataclass(frozen=True, slots=True)
class IndexerOptions:
    """The common options of a store call (Eino's ``indexer.Options``): ``index`` (implementation-defined),
    ``sub_indexes`` the stored documents join, ``embedder`` to embed them with instead of the indexer's own."""

    index: str | None = None
    sub_indexes: Sequence[str] | None = None
    embedder: Embedder | None = None

    def merged(self, **opts: Any) -> IndexerOptions:
        """These options overridden by ``opts``; ``TypeError`` on an unknown name."""
        return _merged(self, opts, "indexer")

