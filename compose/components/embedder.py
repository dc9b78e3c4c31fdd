"""``HashingEmbedder``: a deterministic, offline embedder for tests and demos.

Each text becomes a bag of features, its words and the character n-grams of each word, hashed into a fixed
number of dimensions (the hashing trick, with a sign bit so that collisions cancel out on average instead of
adding up), then L2-normalised: the dot product of two embeddings is their cosine similarity. Texts sharing
words or word parts score high; it knows no synonyms. The hash is BLAKE2b, not Python's salted ``hash()``, so
an embedding is the same in every process.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["HashingEmbedder"]

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """An :class:`~compose.components.Embedder` hashing words and character n-grams into ``dimensions``.

    Args:
        dimensions: the length of every vector.
        ngram: the length of the character n-grams taken from each word (padded with spaces); 0 for words only.
        ngram_weight: the weight of one n-gram relative to one word.
        stop_words: words (lower-case) left out, as are their n-grams.

    An empty text (or one of stop words only) embeds as the zero vector, which is similar to nothing.

    Example:
        >>> import anyio
        >>> e = HashingEmbedder(dimensions=64)
        >>> [a, b] = anyio.run(e.embed_strings, ["green tea", "tea"])
        >>> len(a), round(sum(x * x for x in a), 6), sum(x * y for x, y in zip(a, b)) > 0.5
        (64, 1.0, True)
    """

    def __init__(
        self,
        dimensions: int = 256,
        *,
        ngram: int = 3,
        ngram_weight: float = 0.5,
        stop_words: Iterable[str] = (),
    ) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be at least 1, got {dimensions}")
        if ngram < 0:
            raise ValueError(f"ngram must be 0 (words only) or more, got {ngram}")
        self.dimensions = dimensions
        self.ngram = ngram
        self.ngram_weight = ngram_weight
        self.stop_words = frozenset(w.lower() for w in stop_words)
        self.calls = 0  # embed_strings calls so far (tests assert on batching)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self.dimensions}, ngram={self.ngram}, calls={self.calls})"

    async def embed_strings(self, texts: Sequence[str], **opts: Any) -> list[list[float]]:
        """The embeddings of ``texts``. The only option is Eino's ``model``, which must be ``None`` or
        ``"hashing"`` (this embedder has one model)."""
        unknown = set(opts) - {"model"}
        if unknown:
            raise TypeError(f"unknown embedder option(s) {sorted(unknown)}; expected some of ['model']")
        if opts.get("model") not in (None, "hashing"):
            raise ValueError(f"HashingEmbedder has no model {opts['model']!r} (only 'hashing')")
        if isinstance(texts, str):
            raise TypeError("embed_strings takes a sequence of strings, not one string")
        self.calls += 1
        return [self.embed(text) for text in texts]

    def embed(self, text: str) -> list[float]:
        """The embedding of one text (the synchronous core of ``embed_strings``)."""
        vec = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            if word in self.stop_words:
                continue
            self._add(vec, "w:" + word, 1.0)
            if self.ngram:
                padded = f" {word} "
                for i in range(max(1, len(padded) - self.ngram + 1)):
                    self._add(vec, "n:" + padded[i : i + self.ngram], self.ngram_weight)
        norm = math.sqrt(sum(x * x for x in vec))
        return [x / norm for x in vec] if norm else vec

    def _add(self, vec: list[float], feature: str, weight: float) -> None:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        vec[(h >> 1) % self.dimensions] += weight if h & 1 else -weight
