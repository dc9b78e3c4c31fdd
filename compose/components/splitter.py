"""``TextSplitter``: a document transformer cutting long documents into overlapping chunks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compose.components.document import Document

__all__ = ["TextSplitter"]

IDGenerator = Callable[[str, int], str]


def _sub_id(doc_id: str, i: int) -> str:
    return f"{doc_id}_{i}" if doc_id else str(i)


class TextSplitter:
    """A :class:`~compose.components.DocumentTransformer` splitting each document into chunks of at most
    ``chunk_size`` characters, recursively on ``separators`` (paragraphs, then lines, sentences, words, and
    characters as a last resort), with about ``chunk_overlap`` characters repeated between neighbours.

    Separators stay with the text before them, and chunks are stripped of surrounding whitespace. Each chunk
    keeps a copy of its document's ``meta_data`` plus ``_source_id`` (the document's id) and ``_chunk_index``;
    its id is ``id_generator(document_id, index)``, ``"<id>_<index>"`` by default. A document that fits in one
    chunk is split into that one chunk (so every output has a sub-id).

    Per-call options ``chunk_size`` and ``chunk_overlap`` override the constructor's.

    Example:
        >>> import anyio
        >>> splitter = TextSplitter(chunk_size=12, chunk_overlap=0)
        >>> chunks = anyio.run(splitter.transform, [Document(id="d", content="One two. Three four. Five.")])
        >>> [(c.id, c.content) for c in chunks]
        [('d_0', 'One two.'), ('d_1', 'Three four.'), ('d_2', 'Five.')]
    """

    def __init__(
        self,
        chunk_size: int = 500,
        chunk_overlap: int = 50,
        *,
        separators: Sequence[str] = ("\n\n", "\n", ". ", " ", ""),
        id_generator: IDGenerator = _sub_id,
    ) -> None:
        _check_sizes(chunk_size, chunk_overlap)
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.separators = tuple(separators)
        self.id_generator = id_generator

    def __repr__(self) -> str:
        return f"TextSplitter(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap})"

    async def transform(self, docs: Sequence[Document], **opts: Any) -> list[Document]:
        """The chunks of ``docs``, in order."""
        unknown = set(opts) - {"chunk_size", "chunk_overlap"}
        if unknown:
            raise TypeError(f"unknown splitter option(s) {sorted(unknown)}; expected chunk_size, chunk_overlap")
        size = opts.get("chunk_size") or self.chunk_size
        overlap = opts.get("chunk_overlap", self.chunk_overlap)
        _check_sizes(size, overlap)
        out: list[Document] = []
        for doc in docs:
            for i, text in enumerate(self.split_text(doc.content, chunk_size=size, chunk_overlap=overlap)):
                meta = {**doc.model_copy(deep=True).meta_data, "_source_id": doc.id, "_chunk_index": i}
                out.append(Document(id=self.id_generator(doc.id, i), content=text, meta_data=meta))
        return out

    def split_text(self, text: str, *, chunk_size: int | None = None, chunk_overlap: int | None = None) -> list[str]:
        """The chunks of one text (the synchronous core of ``transform``)."""
        size = chunk_size or self.chunk_size
        overlap = self.chunk_overlap if chunk_overlap is None else chunk_overlap
        return _split(text, list(self.separators), size, overlap)


def _check_sizes(size: int, overlap: int) -> None:
    if size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk_overlap must be at least 0 and less than chunk_size ({size}), got {overlap}")


def _split(text: str, separators: list[str], size: int, overlap: int) -> list[str]:
    # the first separator the text contains; pieces still too long are split on the separators after it
    sep, rest = "", []
    for i, s in enumerate(separators):
        if s == "" or s in text:
            sep, rest = s, separators[i + 1 :]
            break
    if sep:
        parts = text.split(sep)
        pieces = [p + sep for p in parts[:-1]] + [parts[-1]]
    else:
        pieces = list(text)
    chunks: list[str] = []
    small: list[str] = []
    for piece in pieces:
        if len(piece) <= size:
            small.append(piece)
            continue
        chunks.extend(_merge(small, size, overlap))
        small = []
        chunks.extend(_split(piece, rest, size, overlap) if rest else [piece.strip()])
    chunks.extend(_merge(small, size, overlap))
    return [c for c in chunks if c]


def _merge(pieces: list[str], size: int, overlap: int) -> list[str]:
    """Join consecutive pieces into chunks of at most ``size``; each chunk starts with the last pieces of the
    one before it that fit in ``overlap``."""
    chunks: list[str] = []
    window: list[str] = []
    total = 0
    for piece in pieces:
        if window and total + len(piece) > size:
            chunks.append("".join(window).strip())
            while window and (total > overlap or total + len(piece) > size):
                total -= len(window.pop(0))
        window.append(piece)
        total += len(piece)
    if window:
        chunks.append("".join(window).strip())
    return chunks
