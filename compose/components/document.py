"""``Document``, the unit every retrieval component passes on, and ``Source``, what a loader reads.

As Eino's ``schema.Document``: an id, the text content and a free ``meta_data`` mapping. Well-known meta keys
(``_score``, ``_sub_indexes``, ``_dense_vector``, ...) are read and written through methods; a ``with_*`` method
sets its key on this document and returns it, so calls chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Document", "Source"]

_SUB_INDEXES = "_sub_indexes"
_SCORE = "_score"
_EXTRA_INFO = "_extra_info"
_DSL = "_dsl"
_DENSE_VECTOR = "_dense_vector"
_SPARSE_VECTOR = "_sparse_vector"


class Document(BaseModel):
    """A piece of text with an id and metadata.

    Example:
        >>> doc = Document(id="a", content="West Lake").with_score(0.8).with_sub_indexes(["travel"])
        >>> (doc.score(), doc.sub_indexes(), str(doc))
        (0.8, ['travel'], 'West Lake')
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    content: str = ""
    meta_data: dict[str, Any] = Field(default_factory=dict)

    def __str__(self) -> str:
        return self.content

    def _get(self, key: str, kind: type | tuple[type, ...]) -> Any:
        value = self.meta_data.get(key)
        return value if isinstance(value, kind) else None

    def with_score(self, score: float) -> Self:
        """Set the relevance score a retriever gave this document."""
        self.meta_data[_SCORE] = float(score)
        return self

    def score(self) -> float:
        """The retriever's relevance score (0.0 if none)."""
        value = self._get(_SCORE, (int, float))
        return float(value) if value is not None else 0.0

    def with_sub_indexes(self, indexes: list[str]) -> Self:
        """Set the sub-indexes (partitions of an index) this document belongs to."""
        self.meta_data[_SUB_INDEXES] = list(indexes)
        return self

    def sub_indexes(self) -> list[str]:
        """The sub-indexes this document belongs to (empty if none)."""
        return list(self._get(_SUB_INDEXES, (list, tuple)) or [])

    def with_extra_info(self, extra_info: str) -> Self:
        """Set free extra text about this document."""
        self.meta_data[_EXTRA_INFO] = extra_info
        return self

    def extra_info(self) -> str:
        """The extra text ("" if none)."""
        return self._get(_EXTRA_INFO, str) or ""

    def with_dsl_info(self, dsl_info: dict[str, Any]) -> Self:
        """Set the query DSL a retriever used to find this document."""
        self.meta_data[_DSL] = dsl_info
        return self

    def dsl_info(self) -> dict[str, Any] | None:
        """The query DSL (None if none)."""
        value: dict[str, Any] | None = self._get(_DSL, dict)
        return value

    def with_dense_vector(self, vector: list[float]) -> Self:
        """Set this document's embedding."""
        self.meta_data[_DENSE_VECTOR] = [float(x) for x in vector]
        return self

    def dense_vector(self) -> list[float] | None:
        """This document's embedding (None if none)."""
        value: list[float] | None = self._get(_DENSE_VECTOR, list)
        return value

    def with_sparse_vector(self, vector: dict[int, float]) -> Self:
        """Set this document's sparse vector (dimension -> weight)."""
        self.meta_data[_SPARSE_VECTOR] = dict(vector)
        return self

    def sparse_vector(self) -> dict[int, float] | None:
        """This document's sparse vector (None if none)."""
        value: dict[int, float] | None = self._get(_SPARSE_VECTOR, dict)
        return value


@dataclass(frozen=True, slots=True)
class Source:
    """Where a loader reads documents from: ``uri`` is what the loader understands (a relative path for
    :class:`~compose.components.FileLoader`)."""

    uri: str
