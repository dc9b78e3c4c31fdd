"""The data of a cassette: requests and responses as JSON, credentials redacted, matching and mismatch diffs.

A cassette file is one JSON object, written with sorted keys and two-space indents so that a re-recording
diffs line by line::

    {
      "interactions": [
        {"kind": "model", "request": {"messages": [...], "options": {...}, "tools": [...]}, "response": {...}},
        {"kind": "tool", "request": {"arguments": "{...}", "tool": "get_weather"}, "response": {"result": "..."}}
      ],
      "pyeino_cassette": 1
    }
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from compose.errors import CassetteError, ConcatError
from compose.schema import Message, ToolInfo, concat_messages

FORMAT_VERSION = 1
REDACTED = "<redacted>"
MODEL_FIELDS = ("messages", "tools", "options", "model")
"""What a model request can be matched on (``match_on=``): the conversation, the tools offered, the call's options
and the model's name (``wrap(model, name=...)``, else the model's own ``model_name``)."""
DEFAULT_MATCH_ON = ("messages", "tools", "options")

Kind = Literal["model", "tool"]

# a key names a credential when, its separators dropped, it contains one of these, ends in "token" or in a kind
# of key ("api_key", "privateKey", "X-Access-Key"), or has "auth" or "token" as a word ("x-auth", "token_type");
# "max_tokens" and a bare "key" do not
_SECRET_PARTS = ("secret", "password", "passwd", "passphrase", "apikey", "authorization", "credential", "cookie")
_SECRET_KEY_END = re.compile(r"(?:token|(?:api|private|secret|access|signing|encryption|client|session|master)key)$")
_SECRET_WORDS = frozenset({"auth", "token", "pwd"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# values that look like a credential wherever they are
_SECRET_VALUE = re.compile(
    r"^(?:Bearer |Basic |sk-|sk_|xox[abp]-|ghp_|github_pat_|AKIA|-----BEGIN [A-Z ]*PRIVATE KEY)\S+"
)


def is_secret_key(name: str, extra: AbstractSet[str] = frozenset()) -> bool:
    """Whether the value under ``name`` (an option, a header, a tool argument) is a credential: see the rules
    above, case-insensitive; ``extra`` adds names (in lower case)."""
    lower = name.lower()
    if lower in extra:
        return True
    compact = re.sub(r"[^a-z0-9]", "", lower)
    if any(part in compact for part in _SECRET_PARTS) or _SECRET_KEY_END.search(compact):
        return True
    return any(w.lower() in _SECRET_WORDS for w in _WORD.findall(name))


@dataclass(slots=True)
class Interaction:
    """One recorded call: its kind, its request and its response (JSON data)."""

    kind: Kind
    request: dict[str, Any]
    response: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "request": self.request, "response": self.response}


def redact(value: Any, secret_keys: Iterable[str] = ()) -> Any:
    """``value`` (JSON data) with credentials replaced by ``"<redacted>"``: the values of keys that name one
    (:func:`is_secret_key`: ``api_key``, ``Authorization``, ``token``, ``refresh_token``, ``private_key``,
    ``password``, ``cookie``..., and ``secret_keys``), and strings that look like one (``Bearer ...``, ``sk-...``),
    also inside strings holding a JSON object or array (a tool call's arguments), which are written again only
    when something in them was redacted. Idempotent: redacting a redacted value changes nothing."""
    extra = frozenset(k.lower() for k in secret_keys)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: REDACTED if v[k] is not None and is_secret_key(str(k), extra) else walk(v[k]) for k in v}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            if _SECRET_VALUE.match(v):
                return REDACTED
            if v[:1] in ("{", "["):
                return _redact_json_text(v, walk)
        return v

    return walk(value)


def _redact_json_text(text: str, walk: Any) -> str:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    redacted = walk(data)
    return text if redacted == data else json.dumps(redacted, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (pydantic models dumped; what JSON cannot hold becomes its ``str``)."""
    return to_jsonable_python(value, fallback=str)


def dump_message(msg: Message, secret_keys: Iterable[str] = ()) -> dict[str, Any]:
    """``msg`` as JSON data, the arguments of its tool calls redacted (:func:`redact`)."""
    data = msg.model_dump(mode="json", exclude_defaults=True)
    if "tool_calls" in data:
        data["tool_calls"] = redact(data["tool_calls"], secret_keys)
    return data


def dump_chunks(chunks: Sequence[Message], secret_keys: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Streamed chunks as JSON data, redacted. The arguments of a streamed tool call come in fragments sharing an
    ``index``, where a credential may be split so that no fragment shows it: they are redacted whole, and when that
    changes them, the call's first fragment carries the whole redacted arguments and the others none, so that the
    chunks still concatenate to the redacted message."""
    keys = tuple(secret_keys)
    whole: dict[int, str] = {}
    for chunk in chunks:
        for call in chunk.tool_calls:
            if call.index is not None:
                whole[call.index] = whole.get(call.index, "") + call.function.arguments
    redacted = {i: r for i, a in whole.items() if (r := redact(a, keys)) != a}
    placed: set[int] = set()
    out = []
    for chunk in chunks:
        data = chunk.model_dump(mode="json", exclude_defaults=True)
        for n, (call, dumped) in enumerate(zip(chunk.tool_calls, data.get("tool_calls", ()), strict=True)):
            if call.index is None:  # a whole call
                data["tool_calls"][n] = redact(dumped, keys)
            elif call.index in redacted:
                dumped.setdefault("function", {})["arguments"] = "" if call.index in placed else redacted[call.index]
                placed.add(call.index)
        out.append(data)
    return out


def dump_tools(tools: Sequence[ToolInfo]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", exclude_defaults=True) for t in tools]


def load_message(data: Any, where: str) -> Message:
    try:
        return Message.model_validate(data)
    except ValueError as exc:
        raise CassetteError(f"{where}: not a message: {exc}") from None


def model_request(
    messages: Sequence[Message],
    tools: list[dict[str, Any]],
    options: Mapping[str, Any],
    model: str,
    secret_keys: Iterable[str],
) -> dict[str, Any]:
    """A model call as it is recorded (and matched); ``tools`` as :func:`dump_tools` gives them."""
    return {
        "messages": [dump_message(m, secret_keys) for m in messages],
        "tools": tools,
        "options": redact(jsonable(dict(options)), secret_keys),
        "model": model,
    }


def tool_request(name: str, arguments: str, secret_keys: Iterable[str] = ()) -> dict[str, Any]:
    """A tool call as it is recorded: the tool's name and the arguments string as the model wrote it (rewritten
    only when credentials in it are redacted)."""
    return {"tool": name, "arguments": redact(arguments, secret_keys)}


def match_key(kind: Kind, request: Mapping[str, Any], match_on: Sequence[str]) -> str:
    """What two requests must share to match: the chosen fields of a model request; a tool's name and its
    arguments (compared as JSON values, so key order and spacing do not count)."""
    if kind == "tool":
        return _canonical({"tool": request.get("tool"), "arguments": _arguments_value(request.get("arguments"))})
    return _canonical({f: request.get(f) for f in match_on})


def _arguments_value(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def pretty(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2)


def first_difference(recorded: Any, requested: Any, path: str = "") -> str | None:
    """The path of the first place where two JSON values differ (``messages[2].content``), or None."""
    if isinstance(recorded, dict) and isinstance(requested, dict):
        for key in sorted(set(recorded) | set(requested)):
            where = f"{path}.{key}" if path else key
            if key not in recorded or key not in requested:
                return where
            found = first_difference(recorded[key], requested[key], where)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(requested, list):
        for i, (a, b) in enumerate(zip(recorded, requested, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        if len(recorded) != len(requested):
            return f"{path}[{min(len(recorded), len(requested))}]"
        return None
    return None if recorded == requested else path or "(the whole request)"


def compared(kind: Kind, request: Mapping[str, Any], match_on: Sequence[str]) -> dict[str, Any]:
    """The part of a request that matching looks at."""
    if kind == "tool":
        return {"tool": request.get("tool"), "arguments": _arguments_value(request.get("arguments"))}
    return {f: request.get(f) for f in match_on}


def nearest(
    kind: Kind, request: Mapping[str, Any], recorded: Sequence[Interaction], match_on: Sequence[str]
) -> tuple[int, Interaction] | None:
    """The recorded request of ``kind`` most like ``request`` (by text similarity of the compared fields)."""
    target = pretty(compared(kind, request, match_on))
    best: tuple[float, int, Interaction] | None = None
    for i, item in enumerate(recorded):
        if item.kind != kind:
            continue
        matcher = difflib.SequenceMatcher(None, pretty(compared(kind, item.request, match_on)), target, autojunk=False)
        if best is not None and matcher.real_quick_ratio() <= best[0]:
            continue
        score = matcher.ratio()
        if best is None or score > best[0]:
            best = (score, i, item)
    return None if best is None else (best[1], best[2])


def diff(kind: Kind, recorded: Mapping[str, Any], requested: Mapping[str, Any], match_on: Sequence[str]) -> str:
    a = pretty(compared(kind, recorded, match_on)).splitlines()
    b = pretty(compared(kind, requested, match_on)).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "recorded", "requested", n=2, lineterm=""))


def encode(interactions: Sequence[Interaction]) -> str:
    data = {"pyeino_cassette": FORMAT_VERSION, "interactions": [i.to_json() for i in interactions]}
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=2) + "\n"


def decode(text: str, where: str) -> list[Interaction]:
    """The interactions of a cassette file's text, each checked to be replayable.

    Raises:
        CassetteError: the text is not a cassette (names ``where`` and the place that is wrong:
            ``interactions[3].response.chunks[1]``).
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise CassetteError(f"cassette {where} is nested too deeply to be read") from None
    except ValueError as exc:
        raise CassetteError(f"cassette {where} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("pyeino_cassette") != FORMAT_VERSION:
        raise CassetteError(
            f"cassette {where} is not a pyeino cassette (format {FORMAT_VERSION}): "
            f"'pyeino_cassette' is {data.get('pyeino_cassette') if isinstance(data, dict) else None!r}"
        )
    items = data.get("interactions")
    if not isinstance(items, list):
        raise CassetteError(f"cassette {where}: 'interactions' is not a list")
    out = []
    for n, item in enumerate(items):
        ok = (
            isinstance(item, dict)
            and item.get("kind") in ("model", "tool")
            and isinstance(item.get("request"), dict)
            and isinstance(item.get("response"), dict)
        )
        if not ok:
            raise CassetteError(
                f"cassette {where}: interactions[{n}] is not an object with kind 'model' or 'tool', request, response"
            )
        _check_response(item["kind"], item["response"], f"cassette {where}: interactions[{n}].response")
        out.append(Interaction(item["kind"], item["request"], item["response"]))
    return out


def _check_response(kind: Kind, response: dict[str, Any], where: str) -> None:
    """Raise a CassetteError naming the place unless ``response`` replays: a model's ``message`` (and its streamed
    ``chunks``: a list of messages); a tool's ``result`` text (and its streamed ``chunks``: a list of texts)."""
    chunks = response.get("chunks")
    if chunks is not None and not isinstance(chunks, list):
        raise CassetteError(f"{where}.chunks is {type(chunks).__qualname__}, not a list")
    if kind == "model":
        if "message" not in response:
            raise CassetteError(f"{where} has no 'message'")
        load_message(response["message"], f"{where}.message")
        loaded = [load_message(chunk, f"{where}.chunks[{k}]") for k, chunk in enumerate(chunks or ())]
        try:
            if loaded:
                concat_messages(loaded)
        except ConcatError as exc:
            raise CassetteError(f"{where}.chunks do not concatenate: {exc}") from None
        return
    if not isinstance(response.get("result"), str):
        raise CassetteError(f"{where}.result is not a text")
    for k, chunk in enumerate(chunks or ()):
        if not isinstance(chunk, str):
            raise CassetteError(f"{where}.chunks[{k}] is {type(chunk).__qualname__}, not a text")
