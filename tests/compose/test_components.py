"""Retrieval components: Document, the in-process embedder, index, splitter and file loader, and their nodes."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from compose import (
    END,
    START,
    CallbackHandler,
    Document,
    DocumentTransformer,
    Embedder,
    FileLoader,
    Graph,
    GraphBuildError,
    HashingEmbedder,
    Indexer,
    InMemoryVectorIndex,
    Loader,
    LoaderError,
    NodeRunError,
    PathOutsideRootError,
    Retriever,
    RetrieverOptions,
    RunInfo,
    Source,
    TextSplitter,
    TypeMismatchError,
)

pytestmark = pytest.mark.anyio

DOCS = [
    Document(id="tea", content="Longjing green tea grows in the hills around Hangzhou."),
    Document(id="lake", content="West Lake has causeways, pagodas and boats."),
    Document(id="rain", content="Bring an umbrella: spring rain is frequent in Hangzhou."),
]


# ------------------------------------------------------------------------------------------------ Document


def test_document_meta_accessors() -> None:
    doc = Document(id="a", content="x")
    assert (doc.score(), doc.sub_indexes(), doc.extra_info(), doc.dsl_info()) == (0.0, [], "", None)
    assert (doc.dense_vector(), doc.sparse_vector()) == (None, None)
    same = doc.with_score(0.5).with_sub_indexes(["s"]).with_extra_info("e").with_dsl_info({"q": 1})
    same.with_dense_vector([1, 2]).with_sparse_vector({3: 0.5})
    assert same is doc and str(doc) == "x"
    assert doc.meta_data == {
        "_score": 0.5, "_sub_indexes": ["s"], "_extra_info": "e", "_dsl": {"q": 1},
        "_dense_vector": [1.0, 2.0], "_sparse_vector": {3: 0.5},
    }
    assert Document.model_validate_json(doc.model_dump_json()).score() == 0.5
    with pytest.raises(ValueError):
        Document(id="a", body="x")  # type: ignore[call-arg]


def test_protocols_are_runtime_checkable() -> None:
    index = InMemoryVectorIndex(HashingEmbedder())
    assert isinstance(index, Retriever) and isinstance(index, Indexer)
    assert isinstance(HashingEmbedder(), Embedder)
    assert isinstance(TextSplitter(), DocumentTransformer)
    assert isinstance(FileLoader("."), Loader)


def test_retriever_options_reject_unknown_names() -> None:
    assert RetrieverOptions(top_k=3).merged(top_k=None).top_k == 3
    with pytest.raises(TypeError, match="topk"):
        RetrieverOptions().merged(topk=1)


# ------------------------------------------------------------------------------------------------ embedder


async def test_hashing_embedder_is_deterministic_normalised_and_similar_for_shared_words() -> None:
    e = HashingEmbedder(dimensions=128)
    a, b, c, empty = await e.embed_strings(["green tea", "Green TEA!", "diesel engines", ""])
    assert a == b and len(a) == 128
    assert math.isclose(sum(x * x for x in a), 1.0)
    assert empty == [0.0] * 128
    tea = (await e.embed_strings(["tea"]))[0]
    assert sum(x * y for x, y in zip(a, tea, strict=True)) > sum(x * y for x, y in zip(c, tea, strict=True))
    assert e.calls == 2 and repr(e) == "HashingEmbedder(dimensions=128, ngram=3, calls=2)"
    # the same vector in a fresh instance (no salted hash)
    assert (await HashingEmbedder(dimensions=128).embed_strings(["green tea"]))[0] == a


async def test_hashing_embedder_options() -> None:
    e = HashingEmbedder(stop_words=["the"])
    assert await e.embed_strings(["the"], model="hashing") == [[0.0] * 256]
    with pytest.raises(TypeError, match="dims"):
        await e.embed_strings(["x"], dims=3)
    with pytest.raises(ValueError, match="no model"):
        await e.embed_strings(["x"], model="ada")
    with pytest.raises(TypeError):
        await e.embed_strings("one string")


# ------------------------------------------------------------------------------------------------ index


async def test_index_retrieves_by_cosine_with_top_k_threshold_and_scores() -> None:
    index = InMemoryVectorIndex(HashingEmbedder(), top_k=2)
    assert await index.store(DOCS) == ["tea", "lake", "rain"]
    hits = await index.retrieve("green tea")
    assert hits[0].id == "tea" and len(hits) == 2
    assert hits[0].score() >= hits[1].score() > -1.0
    assert "_dense_vector" not in hits[0].meta_data
    assert [d.id for d in await index.retrieve("green tea", top_k=1)] == ["tea"]
    best = hits[0].score()
    assert [d.id for d in await index.retrieve("green tea", top_k=3, score_threshold=best)] == ["tea"]
    assert await index.retrieve("green tea", score_threshold=1.01) == []
    hits[0].content = "changed"  # returned documents are copies
    assert (await index.retrieve("green tea", top_k=1))[0].content == DOCS[0].content
    assert repr(index) == "InMemoryVectorIndex(documents=3, dimensions=256)"


async def test_index_ids_replacement_sub_indexes_and_given_vectors() -> None:
    index = InMemoryVectorIndex(HashingEmbedder(dimensions=2))
    ids = await index.store([Document(content="a"), Document(id="doc-1", content="b"), Document(content="c")])
    assert ids == ["doc-0", "doc-1", "doc-2"]
    await index.store([Document(id="doc-1", content="b2")], sub_indexes=["new"])
    assert len(index) == 3 and [d.content for d in index.documents()] == ["a", "b2", "c"]
    assert [d.id for d in await index.retrieve("anything", sub_index="new")] == ["doc-1"]
    with pytest.raises(ValueError, match="different dimensions"):
        await index.store([Document(id="v", content="v").with_dense_vector([1.0, 0.0, 0.0])])
    assert len(index) == 3  # a failed store changes nothing
    index.delete(["doc-0", "missing"])
    assert [d.id for d in index.documents()] == ["doc-1", "doc-2"]
    with pytest.raises(TypeError, match="sub_indices"):
        await index.store([], sub_indices=["x"])
    with pytest.raises(ValueError, match="top_k"):
        await index.retrieve("x", top_k=0)


async def test_index_embeds_each_store_in_one_call_and_uses_a_per_call_embedder() -> None:
    own, other = HashingEmbedder(), HashingEmbedder()
    index = InMemoryVectorIndex(own)
    await index.store(DOCS)
    await index.retrieve("tea", embedder=other)
    assert (own.calls, other.calls) == (1, 1)


# ------------------------------------------------------------------------------------------------ splitter


async def test_splitter_chunks_on_separators_with_overlap_and_sub_ids() -> None:
    text = "First paragraph is here.\n\nSecond one. It has two sentences.\n\n" + "word " * 30
    splitter = TextSplitter(chunk_size=40, chunk_overlap=10)
    chunks = await splitter.transform([Document(id="d", content=text, meta_data={"k": 1})])
    assert all(len(c.content) <= 40 for c in chunks)
    assert chunks[0].content == "First paragraph is here."
    assert [c.id for c in chunks] == [f"d_{i}" for i in range(len(chunks))]
    assert chunks[1].meta_data == {"k": 1, "_source_id": "d", "_chunk_index": 1}
    words = [c.content for c in chunks if c.content.startswith("word")]
    assert len(words) > 1 and words[1].startswith("word word")  # neighbours overlap


async def test_splitter_options_and_limits() -> None:
    splitter = TextSplitter(chunk_size=100, chunk_overlap=0, id_generator=lambda i, n: f"{i}#{n}")
    doc = Document(id="d", content="aaaa bbbb cccc")
    assert [c.id for c in await splitter.transform([doc])] == ["d#0"]
    assert [c.content for c in await splitter.transform([doc], chunk_size=5)] == ["aaaa", "bbbb", "cccc"]
    assert splitter.split_text("abcdefgh", chunk_size=3) == ["abc", "def", "gh"]
    with pytest.raises(ValueError, match="chunk_overlap"):
        TextSplitter(chunk_size=10, chunk_overlap=10)
    with pytest.raises(TypeError, match="size"):
        await splitter.transform([doc], size=3)


# ------------------------------------------------------------------------------------------------ loader


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "sub").mkdir(parents=True)
    (tmp_path / "root" / "sub" / "a.txt").write_text("hello", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    return tmp_path / "root"


async def test_file_loader_reads_a_file_under_its_root(root: Path) -> None:
    [doc] = await FileLoader(root).load(Source("sub/./a.txt"))
    assert (doc.id, doc.content) == ("sub/a.txt", "hello")
    assert doc.meta_data == {"_source": "sub/./a.txt", "_file_name": "a.txt", "_extension": ".txt"}
    (root / "latin.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(LoaderError, match="not utf-8"):
        await FileLoader(root).load(Source("latin.txt"))
    assert (await FileLoader(root).load(Source("latin.txt"), encoding="latin-1"))[0].content == "café"


@pytest.mark.parametrize("uri", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "..\\secret.txt"])
async def test_file_loader_refuses_paths_outside_its_root(root: Path, uri: str) -> None:
    with pytest.raises(PathOutsideRootError) as info:
        await FileLoader(root).load(Source(uri))
    assert isinstance(info.value, PermissionError) and info.value.uri == uri


async def test_file_loader_refuses_symlinks_escaping_its_root(root: Path) -> None:
    os.symlink(root.parent / "secret.txt", root / "link.txt")
    os.symlink(root.parent, root / "up")
    os.symlink(root / "sub" / "a.txt", root / "inside.txt")
    loader = FileLoader(root)
    for uri in ("link.txt", "up/secret.txt"):
        with pytest.raises(PathOutsideRootError):
            await loader.load(Source(uri))
    assert (await loader.load(Source("inside.txt")))[0].content == "hello"


@pytest.mark.parametrize(
    ("uri", "match"),
    [("missing.txt", "no such file"), ("sub", "not a regular file"), (".", "root directory"),
     ("http://x/y", "not a relative"), ("", "not a relative")],
)
async def test_file_loader_errors(root: Path, uri: str, match: str) -> None:
    with pytest.raises(LoaderError, match=match):
        await FileLoader(root).load(Source(uri))


async def test_file_loader_rejects_unknown_options(root: Path) -> None:
    with pytest.raises(TypeError, match="mode"):
        await FileLoader(root).load(Source("sub/a.txt"), mode="rb")


# ------------------------------------------------------------------------------------------------ nodes


class Recorder(CallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def on_start(self, run_info: RunInfo, input: Any) -> None:
        self.events.append(("start", run_info.component, run_info.type))

    async def on_end(self, run_info: RunInfo, output: Any) -> None:
        self.events.append(("end", run_info.component, run_info.type))


class RecordingRetriever:
    def __init__(self) -> None:
        self.opts: list[dict[str, Any]] = []

    async def retrieve(self, query: str, **opts: Any) -> list[Document]:
        self.opts.append(opts)
        return [Document(id="1", content=query)]


async def test_indexing_pipeline_as_a_graph(root: Path) -> None:
    index = InMemoryVectorIndex(HashingEmbedder())
    g = Graph[Source, list[str]]()
    g.add_loader_node("load", FileLoader(root))
    g.add_document_transformer_node("split", TextSplitter(chunk_size=3, chunk_overlap=0))
    g.add_indexer_node("index", index)
    for a, b in [(START, "load"), ("load", "split"), ("split", "index"), ("index", END)]:
        g.add_edge(a, b)
    rec = Recorder()
    ids = await g.compile().invoke(Source("sub/a.txt"), callbacks=[rec])
    assert ids == ["sub/a.txt_0", "sub/a.txt_1"]
    assert [d.content for d in index.documents()] == ["hel", "lo"]
    components = [(e, c) for e, c, _ in rec.events if c != "Graph"]
    assert components == [
        ("start", "Loader"), ("end", "Loader"), ("start", "DocumentTransformer"), ("end", "DocumentTransformer"),
        ("start", "Indexer"), ("end", "Indexer"),
    ]
    assert ("start", "Indexer", "InMemoryVectorIndex") in rec.events


async def test_retriever_and_embedding_nodes_take_node_options() -> None:
    retriever = RecordingRetriever()
    g = Graph[str, list[Document]]()
    g.add_retriever_node("retrieve", retriever, name="search")
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", END)
    r = g.compile()
    assert [d.content for d in await r.invoke("q")] == ["q"]
    await r.invoke("q", node_options={"retrieve": {"top_k": 2, "score_threshold": 0.3}})
    assert retriever.opts == [{}, {"top_k": 2, "score_threshold": 0.3}]
    chunks = [c async for c in await r.stream("q")]  # derived stream: one chunk
    assert [[d.content for d in c] for c in chunks] == [["q"]]

    e = Graph[list[str], list[list[float]]]()
    e.add_embedding_node("embed", HashingEmbedder(dimensions=4))
    e.add_edge(START, "embed")
    e.add_edge("embed", END)
    er = e.compile()
    [v] = await er.invoke(["tea"], node_options={"embed": {"model": "hashing"}})
    assert len(v) == 4
    with pytest.raises(NodeRunError) as info:
        await er.invoke(["tea"], node_options={"embed": {"model": "ada"}})
    assert info.value.node_path == ["embed"] and isinstance(info.value.__cause__, ValueError)


async def test_index_as_retriever_node_with_options() -> None:
    index = InMemoryVectorIndex(HashingEmbedder(), top_k=3)
    await index.store(DOCS)
    g = Graph[str, list[Document]]()
    g.add_retriever_node("retrieve", index)
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", END)
    r = g.compile()
    assert len(await r.invoke("Hangzhou tea")) == 3
    hits = await r.invoke("Hangzhou tea", node_options={"retrieve": {"top_k": 1}})
    assert [d.id for d in hits] == ["tea"] and hits[0].score() > 0


def test_component_nodes_are_typed() -> None:
    g = Graph[str, list[str]]()
    g.add_retriever_node("retrieve", RecordingRetriever())
    g.add_indexer_node("index", InMemoryVectorIndex(HashingEmbedder()))
    g.add_embedding_node("embed", HashingEmbedder())
    g.add_edge(START, "retrieve")
    g.add_edge("retrieve", "index")  # list[Document] -> list[Document]
    g.add_edge("index", "embed")  # list[str] -> list[str]
    with pytest.raises(TypeMismatchError, match="embed"):
        g.add_edge("embed", END)  # list[list[float]] -> list[str]
    with pytest.raises(TypeMismatchError):
        g.add_edge(START, "index")  # str -> list[Document]


def test_component_nodes_need_the_method() -> None:
    g = Graph[str, str]()
    with pytest.raises(GraphBuildError, match="async retrieve"):
        g.add_retriever_node("r", object())  # type: ignore[arg-type]
    with pytest.raises(GraphBuildError, match="async load"):
        g.add_loader_node("l", HashingEmbedder())  # type: ignore[arg-type]


async def test_component_node_options_must_be_keyword_options_the_component_knows() -> None:
    g = Graph[list[Document], list[Document]]()
    g.add_document_transformer_node("split", TextSplitter(chunk_size=10, chunk_overlap=0))
    g.add_edge(START, "split")
    g.add_edge("split", END)
    r = g.compile()
    out = await r.invoke([Document(id="d", content="aaaa bbbb cccc")], node_options={"split": {"chunk_size": 5}})
    assert [d.content for d in out] == ["aaaa", "bbbb", "cccc"]
    with pytest.raises(NodeRunError) as info:
        await r.invoke([Document(content="x")], node_options={"split": {"size": 5}})
    assert isinstance(info.value.__cause__, TypeError)
