"""Retrieval components: ``Document``, the ``Retriever``, ``Embedder``, ``Indexer``, ``Loader`` and
``DocumentTransformer`` protocols, and one small in-process implementation of each, for tests and demos.

``Graph.add_retriever_node`` and its siblings make any of them a graph node. A whole offline RAG pipeline::

    docs = await FileLoader("docs").load(Source("guide.txt"))
    index = InMemoryVectorIndex(HashingEmbedder())
    await index.store(await TextSplitter(chunk_size=300).transform(docs))
    hits = await index.retrieve("how do I resume?", top_k=3)
"""

from compose.components.base import (
    DocumentTransformer,
    Embedder,
    Indexer,
    IndexerOptions,
    Loader,
    Retriever,
    RetrieverOptions,
)
from compose.components.document import Document, Source
from compose.components.embedder import HashingEmbedder
from compose.components.file_loader import FileLoader
from compose.components.memory_index import InMemoryVectorIndex
from compose.components.splitter import TextSplitter

__all__ = [
    "Document",
    "DocumentTransformer",
    "Embedder",
    "FileLoader",
    "HashingEmbedder",
    "InMemoryVectorIndex",
    "Indexer",
    "IndexerOptions",
    "Loader",
    "Retriever",
    "RetrieverOptions",
    "Source",
    "TextSplitter",
]
