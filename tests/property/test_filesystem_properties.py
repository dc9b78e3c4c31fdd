"""Random sequences of filesystem tool calls give the same outputs (or the same errors) on InMemoryBackend and on
LocalBackend, and no output of LocalBackend ever shows a host path."""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adk.middlewares import InMemoryBackend, LocalBackend
from adk.middlewares.filesystem import filesystem_tools

pytestmark = pytest.mark.anyio

names = st.sampled_from(["a", "b", "notes.txt", "x.py", "d"])
paths = st.one_of(
    st.lists(names, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts)),
    st.lists(names, min_size=1, max_size=2).map("/".join),  # relative: under /
    st.sampled_from(["/", "", "/a/../b", "/../etc/passwd", "a/\x00b", "/d/./x.py", "//a"]),
)
text = st.text(alphabet="ab \nxy.", max_size=30)
fragment = st.text(alphabet="ab x", min_size=0, max_size=3)
patterns = st.sampled_from(["a", "b+", "^x", "a.b", "(", "y$", "[ab]x"])
globs = st.sampled_from(["*", "**/*", "*.py", "**/*.txt", "a/*", "/d/**", "{a,b}", "[ab]", "?"])

calls = st.one_of(
    st.tuples(st.just("write_file"), st.fixed_dictionaries({"file_path": paths, "content": text})),
    st.tuples(
        st.just("edit_file"),
        st.fixed_dictionaries(
            {"file_path": paths, "old_string": fragment, "new_string": fragment, "replace_all": st.booleans()}
        ),
    ),
    st.tuples(
        st.just("read_file"),
        st.fixed_dictionaries({"file_path": paths, "offset": st.integers(-1, 4), "limit": st.integers(0, 3)}),
    ),
    st.tuples(st.just("ls"), st.fixed_dictionaries({"path": paths})),
    st.tuples(st.just("glob"), st.fixed_dictionaries({"pattern": globs, "path": paths})),
    st.tuples(
        st.just("grep"),
        st.fixed_dictionaries(
            {
                "pattern": patterns,
                "output_mode": st.sampled_from(["content", "count", "files_with_matches"]),
            },
            optional={"path": paths, "glob": globs, "-C": st.integers(0, 2), "multiline": st.booleans()},
        ),
    ),
    st.tuples(st.just("delete"), st.fixed_dictionaries({"file_path": paths})),
)


async def outcome(backend: Any, tools: dict[str, Any], name: str, args: dict[str, Any]) -> str:
    try:
        if name == "delete":
            await backend.delete(args["file_path"])
            return "deleted"
        result: str = await tools[name].run(json.dumps(args))
        return result
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=60, deadline=None)
@given(sequence=st.lists(calls, min_size=1, max_size=14))
async def test_both_backends_answer_every_call_alike(sequence: list[tuple[str, dict[str, Any]]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        memory, local = InMemoryBackend(), LocalBackend(root)
        memory_tools = {t.info().name: t for t in filesystem_tools(memory)}
        local_tools = {t.info().name: t for t in filesystem_tools(local)}
        for name, args in sequence:
            expected = await outcome(memory, memory_tools, name, args)
            got = await outcome(local, local_tools, name, args)
            assert got == expected, (name, args)
            assert root not in got
