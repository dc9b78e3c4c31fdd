"""``InMemoryVectorIndex``: an indexer and a retriever over one list in memory, by cosine similarity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compose.components.base import Embedder, IndexerOptions, RetrieverOptions
from compose.components.document import Document

__all__ = ["InMemoryVectorIndex"]


@dataclass(slots=True)
class _Entry:
    doc: Document
    vector: list[float]
    norm: float


class InMemoryVectorIndex:
    """Both an :class:`~compose.components.Indexer` and a :class:`~compose.components.Retriever`: ``store``
    embeds documents and keeps them; ``retrieve`` embeds the query and returns the stored documents most
    similar to it (cosine similarity), best first, as copies with ``score()`` set.

    A document without an id gets ``doc-<n>``; storing an id again replaces that document. A document that
    already carries ``dense_vector()`` is stored with that vector (its dimension must match). Stored documents
    are copies: changing one afterwards does not change the index.

    Args:
        embedder: embeds documents and queries (an option ``embedder=`` overrides it per call).
        top_k: how many documents ``retrieve`` returns at most, unless the call says otherwise.
        score_threshold: the least score a returned document has (None: no threshold).

    Store options are :class:`~compose.components.IndexerOptions` (``sub_indexes``: the stored documents join
    these sub-indexes; ``index`` is not supported); retrieve options are
    :class:`~compose.components.RetrieverOptions` (``sub_index`` filters by sub-index; ``index`` and
    ``dsl_info`` are not supported).

    Example:
        >>> import anyio
        >>> from compose.components import HashingEmbedder
        >>> index = InMemoryVectorIndex(HashingEmbedder())
        >>> anyio.run(index.store, [Document(content="green tea"), Document(content="red wine")])
        ['doc-0', 'doc-1']
        >>> [d.content for d in anyio.run(lambda: index.retrieve("tea", top_k=1))]
        ['green tea']
    """

    def __init__(self, embedder: Embedder, *, top_k: int = 4, score_threshold: float | None = None) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        self.embedder = embedder
        self._defaults = RetrieverOptions(top_k=top_k, score_threshold=score_threshold)
        self._entries: dict[str, _Entry] = {}
        self._next_id = 0
        self._dimensions: int | None = None

    def __repr__(self) -> str:
        return f"InMemoryVectorIndex(documents={len(self._entries)}, dimensions={self._dimensions})"

    def __len__(self) -> int:
        return len(self._entries)

    def documents(self) -> list[Document]:
        """Copies of the stored documents, in the order they were first stored."""
        return [e.doc.model_copy(deep=True) for e in self._entries.values()]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the documents with these ids (ids not stored are ignored)."""
        for doc_id in ids:
            self._entries.pop(doc_id, None)

    async def store(self, docs: Sequence[Document], **opts: Any) -> list[str]:
        """Embed ``docs`` (one ``embed_strings`` call for those without a vector) and store them; their ids."""
        o = IndexerOptions().merged(**opts)
        if o.index is not None:
            raise ValueError("InMemoryVectorIndex has one index: the option index= is not supported")
        embedder = o.embedder or self.embedder
        docs = [d.model_copy(deep=True) for d in docs]
        missing = [d for d in docs if d.dense_vector() is None]
        if missing:
            vectors = await embedder.embed_strings([d.content for d in missing])
            if len(vectors) != len(missing):
                raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(missing)} documents")
            for d, v in zip(missing, vectors, strict=True):
                d.meta_data["_dense_vector"] = [float(x) for x in v]
        vectors = [d.meta_data.pop("_dense_vector") for d in docs]
        dims = {len(v) for v in vectors} | ({self._dimensions} if self._dimensions is not None else set())
        if len(dims) > 1:
            raise ValueError(f"vectors of different dimensions {sorted(dims)} cannot share one index")
        # all checked before anything is stored: a failed call changes nothing
        taken = {d.id for d in docs}
        entries: list[_Entry] = []
        for d, vector in zip(docs, vectors, strict=True):
            if o.sub_indexes is not None:
                d.with_sub_indexes(sorted({*d.sub_indexes(), *o.sub_indexes}))
            if not d.id:
                d.id = self._new_id(taken)
            entries.append(_Entry(d, vector, math.sqrt(sum(x * x for x in vector))))
        if dims:
            self._dimensions = dims.pop()
        for e in entries:
            self._entries[e.doc.id] = e
        return [e.doc.id for e in entries]

    async def retrieve(self, query: str, **opts: Any) -> list[Document]:
        """The stored documents most similar to ``query``, best first (ties: first stored first)."""
        o = self._defaults.merged(**opts)
        if o.index is not None or o.dsl_info is not None:
            raise ValueError("InMemoryVectorIndex supports neither index= nor dsl_info=")
        top_k = o.top_k if o.top_k is not None else 4
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        [q] = await (o.embedder or self.embedder).embed_strings([query])
        if self._dimensions is not None and len(q) != self._dimensions:
            raise ValueError(f"a query vector of dimension {len(q)} does not fit an index of {self._dimensions}")
        q_norm = math.sqrt(sum(x * x for x in q))
        scored: list[tuple[float, int, _Entry]] = []
        for i, e in enumerate(self._entries.values()):
            if o.sub_index is not None and o.sub_index not in e.doc.sub_indexes():
                continue
            dot = sum(a * b for a, b in zip(q, e.vector, strict=True))
            score = dot / (q_norm * e.norm) if q_norm and e.norm else 0.0
            if o.score_threshold is None or score >= o.score_threshold:
                scored.append((-score, i, e))
        scored.sort(key=lambda t: (t[0], t[1]))
        return [e.doc.model_copy(deep=True).with_score(-neg) for neg, _, e in scored[:top_k]]

    def _new_id(self, taken: set[str]) -> str:
        while (new := f"doc-{self._next_id}") in self._entries or new in taken:
            self._next_id += 1
        taken.add(new)
        return new
