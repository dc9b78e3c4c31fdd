"""Cassettes on their own (compose.testing.cassette): modes, paradigms, tools, matching, mismatch errors, the
file's format, and the pytest plugin (through its entry point, in a pytest subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from compose.errors import CassetteError, CassetteMismatchError, CassetteNotFoundError
from compose.models import ScriptedChatModel
from compose.schema import FunctionCall, Message, ToolCall, ToolInfo, concat_messages, user_message
from compose.stream import StreamReader
from compose.testing import Cassette, cassette
from compose.tools import tool

pytestmark = pytest.mark.anyio

HI = [user_message("hi")]
ROOT = Path(__file__).resolve().parents[2]


@tool
def weather(city: str) -> str:
    """Weather.

    Args:
        city: the city.
    """
    ran.append(city)
    return f"rain in {city}"


ran: list[str] = []


@tool
async def words(text: str) -> Any:
    """Stream words.

    Args:
        text: the text.
    """
    for w in text.split():
        yield w + " "


async def read(reader: StreamReader[Any]) -> list[Any]:
    async with reader:
        return [c async for c in reader]


def file_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


async def test_once_records_when_the_file_is_missing_and_replays_afterwards(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.json"
    async with cassette(path) as tape:
        assert tape.recording
        answer = await tape.wrap(ScriptedChatModel(["Hello there"])).generate(HI)
    assert answer.content == "Hello there" and path.exists()
    async with cassette(path) as tape:
        assert not tape.recording
        again = await tape.wrap(ScriptedChatModel([])).generate(HI)  # an empty script: nothing is asked of it
        assert tape.replayed == 1
    assert again == answer


async def test_none_without_a_file_fails_and_all_records_again(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    with pytest.raises(CassetteNotFoundError, match="does not exist and mode 'none' only replays"):
        async with cassette(path, "none"):
            pass
    for text in ("first", "second"):
        async with cassette(path, "all") as tape:
            await tape.wrap(ScriptedChatModel([text])).generate(HI)
    async with cassette(path, "none") as tape:
        assert (await tape.wrap(ScriptedChatModel([])).generate(HI)).content == "second"


async def test_new_replays_what_is_recorded_and_records_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        await tape.wrap(ScriptedChatModel(["one"])).generate(HI)
    async with cassette(path, "new") as tape:
        model = tape.wrap(ScriptedChatModel(["two"]))
        assert (await model.generate(HI)).content == "one"  # replayed
        assert (await model.generate([user_message("bye")])).content == "two"  # recorded
        assert (tape.replayed, tape.recorded) == (1, 1)
    assert len(json.loads(file_text(path))["interactions"]) == 2


async def test_a_whole_answer_streams_as_one_chunk_and_chunks_concatenate_for_generate(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        model = tape.wrap(ScriptedChatModel(["whole answer", "streamed answer"], chunk_size=3))
        whole = await model.generate(HI)
        chunks = await read(await model.stream([user_message("stream it")]))
    assert len(chunks) > 3
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        assert await read(await model.stream(HI)) == [whole]
        assert await read(await model.stream([user_message("stream it")])) == chunks
        assert await model.generate([user_message("stream it")]) == concat_messages(chunks)


async def test_a_stream_closed_early_is_not_recorded(tmp_path: Path) -> None:
    async with cassette(tmp_path / "c.json", "all") as tape:
        reader = await tape.wrap(ScriptedChatModel(["a long answer"], chunk_size=2)).stream(HI)
        await reader.recv()
        await reader.aclose()
        assert tape.recorded == 0


async def test_a_recorded_stream_closed_before_its_first_chunk_closes_the_model_stream(tmp_path: Path) -> None:
    async with cassette(tmp_path / "c.json", "all") as tape:
        model = tape.wrap(ScriptedChatModel(["answer"]))
        await (await model.stream(HI)).aclose()  # the autouse leak check fails the test if the inner stream is open
        tool_reader = await tape.wrap_tool(words).stream('{"text": "a b"}')  # type: ignore[attr-defined]
        await tool_reader.aclose()
        assert tape.recorded == 0


async def test_a_repeated_request_replays_its_recordings_in_order_then_the_last(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        model = tape.wrap(ScriptedChatModel(["a", "b"]))
        assert [(await model.generate(HI)).content for _ in range(2)] == ["a", "b"]
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        assert [(await model.generate(HI)).content for _ in range(3)] == ["a", "b", "b"]


async def test_tools_replay_without_running_in_either_paradigm(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    ran.clear()
    async with cassette(path, "all") as tape:
        w, s = tape.wrap_tool(weather), tape.wrap_tool(words)
        assert w.info() == weather.info() and not hasattr(w, "stream") and not hasattr(s, "run")
        assert await w.run('{"city": "Hangzhou"}') == "rain in Hangzhou"  # type: ignore[attr-defined]
        assert await read(await s.stream('{"text": "a b"}')) == ["a ", "b "]  # type: ignore[attr-defined]
    assert ran == ["Hangzhou"]
    async with cassette(path, "none") as tape:
        w, s = tape.wrap_tool(weather), tape.wrap_tool(words)
        # arguments match as JSON values: spacing and key order do not count
        assert await w.run('{ "city":"Hangzhou" }') == "rain in Hangzhou"  # type: ignore[attr-defined]
        assert await read(await s.stream('{"text": "a b"}')) == ["a ", "b "]  # type: ignore[attr-defined]
        with pytest.raises(CassetteMismatchError) as info:
            await w.run('{"city": "Suzhou"}')  # type: ignore[attr-defined]
    assert ran == ["Hangzhou"]
    assert info.value.kind == "tool" and info.value.field == "arguments.city"
    assert "call of tool 'weather'" in str(info.value) and '+    "city": "Suzhou"' in info.value.diff


class Both:
    """A tool with both protocols (as a ToolsNode picks one per run mode)."""

    def info(self) -> ToolInfo:
        return ToolInfo(name="both", description="both ways")

    async def run(self, arguments: str) -> str:
        return "whole " + arguments

    async def stream(self, arguments: str) -> StreamReader[str]:
        return StreamReader.from_iterable(["part ", arguments])


async def test_a_tool_call_recorded_in_one_paradigm_replays_in_the_other(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        tool_ = tape.wrap_tool(Both())
        assert await tool_.run("{}") == "whole {}"  # type: ignore[attr-defined]
        assert await read(await tool_.stream('{"x": 1}')) == ["part ", '{"x": 1}']  # type: ignore[attr-defined]
    async with cassette(path, "none") as tape:
        tool_ = tape.wrap_tool(Both())
        assert await read(await tool_.stream("{}")) == ["whole {}"]  # type: ignore[attr-defined]
        assert await tool_.run('{"x": 1}') == 'part {"x": 1}'  # type: ignore[attr-defined]


async def test_mismatches_name_the_differing_field(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    info = ToolInfo(name="t", description="d")
    async with cassette(path, "all") as tape:
        model = tape.wrap(ScriptedChatModel(["x", "y"]))
        await model.generate(HI, temperature=0.2)
        await model.with_tools([info]).generate([user_message("other")])
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        with pytest.raises(CassetteMismatchError) as e:
            await model.generate(HI, temperature=0.3)
        assert e.value.field == "options.temperature"
        with pytest.raises(CassetteMismatchError) as e:
            await model.with_tools([info.model_copy(update={"description": "new"})]).generate([user_message("other")])
        assert e.value.field == "tools[0].description"
        with pytest.raises(CassetteMismatchError) as e:
            await model.stream([*HI, user_message("more")], temperature=0.2)
        assert e.value.field == "messages[1]" and "interactions[0]" in str(e.value)
        with pytest.raises(CassetteMismatchError) as e:
            await tape.wrap_tool(weather).run("{}")  # type: ignore[attr-defined]
        assert e.value.field is None and "has no recorded tool calls" in str(e.value)
    async with cassette(path, "none", match_on=["messages"]) as tape:  # options are not compared
        assert (await tape.wrap(ScriptedChatModel([])).generate(HI, temperature=0.9)).content == "x"


async def test_the_file_is_stable_sorted_and_human_diffable(tmp_path: Path) -> None:
    texts = []
    for name in ("a.json", "b.json"):
        async with cassette(tmp_path / name, "all") as tape:
            model = tape.wrap(ScriptedChatModel(["héllo"]))
            await read(await model.stream(HI, seed=3))
            await tape.wrap_tool(weather).run('{"city": "杭州"}')  # type: ignore[attr-defined]
        texts.append(file_text(tmp_path / name))
    assert texts[0] == texts[1]
    text = texts[0]
    assert "héllo" in text and "杭州" in text  # not \u-escaped
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, ensure_ascii=False, indent=2) + "\n"
    assert [i["kind"] for i in data["interactions"]] == ["model", "tool"]
    assert data["interactions"][0]["request"]["options"] == {"seed": 3}


async def test_save_writes_before_the_block_ends_and_nothing_works_outside_it(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    tape = cassette(path, "all")
    model = tape.wrap(ScriptedChatModel(["x"]))
    with pytest.raises(CassetteError, match="is not open"):
        await model.generate(HI)
    async with tape:
        await model.generate(HI)
        tape.save()
        assert path.exists()
        with pytest.raises(CassetteError, match="already open"):
            tape.open()
    assert "closed" in repr(tape) and "recorded=1" in repr(tape)


def test_sync_with_block_and_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    with cassette(path) as tape:
        assert anyio.run(tape.wrap(ScriptedChatModel(["s"])).generate, HI).content == "s"
    assert path.exists()
    with pytest.raises(ValueError, match="cassette mode must be one of once, none, all, new"):
        cassette(path, "replay")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="match_on takes some of"):
        cassette(path, match_on=["headers"])
    with pytest.raises(TypeError, match="not a chat model"):
        Cassette(path).wrap(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a tool"):
        Cassette(path).wrap_tool(object())  # type: ignore[arg-type]
    (tmp_path / "bad.json").write_text('{"interactions": []}', encoding="utf-8")
    with pytest.raises(CassetteError, match="is not a pyeino cassette"), cassette(tmp_path / "bad.json", "none"):
        pass
    (tmp_path / "bad.json").write_text('{"pyeino_cassette": 1, "interactions": [{"kind": "x"}]}', encoding="utf-8")
    with pytest.raises(CassetteError, match=r"interactions\[0\] is not an object"), cassette(tmp_path / "bad.json"):
        pass


async def test_a_wrapped_model_shows_its_inner_model() -> None:
    from compose.models.base import model_identity

    tape = cassette("unused.json")
    model = tape.wrap(ScriptedChatModel([]))
    assert model_identity(model) == ("scripted", "pyeino.scripted")
    assert model.supports_response_format is False
    assert "ScriptedChatModel" in repr(model)


# --- the pytest plugin, registered through its entry point -----------------------------------------------------

PLUGIN_TEST = """
from compose.models import ScriptedChatModel
from compose.schema import user_message
import anyio

def test_trip(pyeino_cassette):
    model = pyeino_cassette.wrap(ScriptedChatModel(["recorded answer"]))
    assert anyio.run(model.generate, [user_message("hi")]).content == "recorded answer"
    assert pyeino_cassette.path.name == "test_trip.json"
"""


@pytest.mark.slow
@pytest.mark.timeout(600)  # four pytest processes, each loading every installed plugin
def test_the_pytest_plugin_names_cassettes_after_tests_and_takes_the_mode(tmp_path: Path) -> None:
    # an installed distribution whose entry point is the one pyproject.toml declares
    dist = tmp_path / "site" / "pyeino_cassette_plugin-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pyeino-cassette-plugin\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\npyeino_cassette = pyeino_pytest\n")
    assert 'pyeino_cassette = "pyeino_pytest"' in file_text(ROOT / "pyproject.toml")
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_mod.py").write_text(PLUGIN_TEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "site")])}

    def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args, "tests"]
        return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)

    missing = pytest_run("--cassette-mode", "none")
    assert missing.returncode == 1 and "CassetteNotFoundError" in missing.stdout, missing.stdout + missing.stderr
    recorded = pytest_run()  # once: records
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    cassette_file = project / "tests" / "cassettes" / "test_mod" / "test_trip.json"
    assert "recorded answer" in file_text(cassette_file)
    replayed = pytest_run("--cassette-mode=none")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    bad = pytest_run("--cassette-mode=sometimes")
    assert bad.returncode == 4 and "invalid choice" in bad.stderr


def test_the_plugin_imports_no_pyeino_module_and_knows_the_modes() -> None:
    code = "import sys, pyeino_pytest; print(sorted(m for m in sys.modules if m.split('.')[0] in ('compose', 'adk')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    from compose.testing.cassette import MODES
    from pyeino_pytest import MODES as PLUGIN_MODES

    assert PLUGIN_MODES == MODES


def test_the_fixture_path_is_named_after_module_and_test() -> None:
    from pyeino_pytest import cassette_path

    class Node:
        path = Path("/p/tests/test_trip.py")
        name = "test_day[a b/c]"

    assert cassette_path(Node()) == Path("/p/tests/cassettes/test_trip/test_day[a_b_c].json")  # type: ignore[arg-type]


async def test_message_round_trip_keeps_every_field(tmp_path: Path) -> None:
    from compose.schema import FunctionCall, ResponseMeta, ToolCall, Usage

    msg = Message(
        role="assistant",
        content="c",
        reasoning_content="r",
        tool_calls=[ToolCall(id="1", index=0, function=FunctionCall(name="f", arguments="{}"), extra={"k": 1})],
        response_meta=ResponseMeta(finish_reason="tool_calls", usage=Usage(prompt_tokens=1, total_tokens=1)),
        extra={"x": [1, 2]},
    )
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        await tape.wrap(ScriptedChatModel([msg])).generate(HI)
    async with cassette(path, "none") as tape:
        assert await tape.wrap(ScriptedChatModel([])).generate(HI) == msg


async def test_messages_with_content_parts_record_match_and_replay(tmp_path: Path) -> None:
    from compose.schema import ImagePart, TextPart

    picture = ImagePart.from_bytes(b"\x89PNG....", "image/png")
    question = [user_message("what is this?", parts=[TextPart(text="what is this?"), picture])]
    answer = Message(role="assistant", content="a tiny picture")
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        await tape.wrap(ScriptedChatModel([answer])).generate(question)
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        assert (await model.generate(question)).content == "a tiny picture"
        other = ImagePart.from_bytes(b"\x89PNG....!", "image/png")
        with pytest.raises(CassetteMismatchError) as e:
            await model.generate([user_message("what is this?", parts=[TextPart(text="what is this?"), other])])
    assert e.value.field == "messages[0].parts[1].data"


# --- credentials and tampered files -------------------------------------------------------------------------------

SECRETS = ["tok-1", "refresh-2", "session-3", "-----BEGIN RSA PRIVATE KEY-----x", "pw-4", "sk-live-5", "c-6", "sec-7"]


@tool
def login(user: str, api_key: str, extra: dict[str, Any]) -> str:
    """Log in.

    Args:
        user: who.
        api_key: the key.
        extra: more.
    """
    return f"hello {user}"


async def test_no_credential_reaches_the_file_and_a_replay_matches_redacted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    arguments = json.dumps(
        {"user": "ann", "api_key": "sk-live-5", "extra": {"Refresh_Token": "refresh-2", "note": "window seat"}}
    )
    call = Message(
        role="assistant", tool_calls=[ToolCall(id="c1", function=FunctionCall(name="login", arguments=arguments))]
    )
    extra_body = {"refresh_token": "refresh-2", "SessionToken": "session-3", "private_key": SECRETS[3]}
    options = {
        "token": "tok-1",
        "extra_body": extra_body,
        "Password": "pw-4",
        "COOKIE": "c-6",
        "client-secret": "sec-7",
        "max_tokens": 64,
    }
    async with cassette(path, "all") as tape:
        model = tape.wrap(ScriptedChatModel([call, call], chunk_size=3))
        await model.generate(HI, **options)
        streamed = concat_messages(await read(await model.stream([user_message("again")])))
        assert streamed.tool_calls[0].function.arguments == arguments  # the live run sees the real arguments
        assert await tape.wrap_tool(login).run(arguments) == "hello ann"  # type: ignore[attr-defined]
    text = file_text(path)
    for secret in SECRETS:
        assert secret not in text
    data = json.loads(text)["interactions"]
    assert data[0]["request"]["options"]["max_tokens"] == 64  # a count of tokens is no credential
    redacted = {"user": "ann", "api_key": "<redacted>", "extra": {"Refresh_Token": "<redacted>", "note": "window seat"}}
    assert json.loads(data[2]["request"]["arguments"]) == redacted
    assert data[0]["request"]["options"]["extra_body"] == dict.fromkeys(extra_body, "<redacted>")
    async with cassette(path, "none") as tape:
        model = tape.wrap(ScriptedChatModel([]))
        answer = await model.generate(HI, **options)
        (replayed,) = answer.tool_calls
        assert json.loads(replayed.function.arguments) == redacted  # a replay sees what the file holds
        chunks = await read(await model.stream([user_message("again")]))
        assert json.loads(concat_messages(chunks).tool_calls[0].function.arguments) == redacted
        tool = tape.wrap_tool(login)
        assert await tool.run(replayed.function.arguments) == "hello ann"  # type: ignore[attr-defined]
        assert await tool.run(arguments) == "hello ann"  # type: ignore[attr-defined]  # matched once redacted


@pytest.mark.parametrize(
    ("response", "place"),
    [
        ({"chunks": 5, "message": {"role": "assistant"}}, r"interactions\[0\]\.response\.chunks is int, not a list"),
        ({"chunks": [{"role": 5}], "message": {"role": "assistant"}}, r"interactions\[0\]\.response\.chunks\[0\]"),
        ({"message": "hi"}, r"interactions\[0\]\.response\.message: not a message"),
        ({"chunks": []}, r"interactions\[0\]\.response has no 'message'"),
    ],
)
async def test_a_tampered_model_answer_raises_a_cassette_error_naming_its_place(
    tmp_path: Path, response: dict[str, Any], place: str
) -> None:
    path = tmp_path / "c.json"
    async with cassette(path, "all") as tape:
        await tape.wrap(ScriptedChatModel(["hi"])).generate(HI)
    data = json.loads(file_text(path))
    data["interactions"][0]["response"] = response
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(CassetteError, match=place) as caught:
        async with cassette(path, "none") as tape:
            await read(await tape.wrap(ScriptedChatModel([])).stream(HI))
    assert str(path) in str(caught.value)


def test_a_tampered_tool_result_or_an_unreadable_file_raises_a_cassette_error(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    for response, place in [
        ({"result": 3}, r"interactions\[0\]\.response\.result is not a text"),
        ({"result": "r", "chunks": [1]}, r"interactions\[0\]\.response\.chunks\[0\] is int, not a text"),
    ]:
        interaction = {"kind": "tool", "request": {"tool": "weather", "arguments": "{}"}, "response": response}
        path.write_text(json.dumps({"pyeino_cassette": 1, "interactions": [interaction]}), encoding="utf-8")
        with pytest.raises(CassetteError, match=place), cassette(path, "none"):
            pass
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(CassetteError, match="is not UTF-8 text"), cassette(path, "none"):
        pass
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(CassetteError, match="nested too deeply"), cassette(path, "none"):
        pass
