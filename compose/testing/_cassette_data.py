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
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from compose.errors import CassetteError
from compose.schema import Message, ToolInfo

FORMAT_VERSION = 1
REDACTED = "<redacted>"
MODEL_FIELDS = ("messages", "tools", "options", "model")
"""What a model request can be matched on (``match_on=``): the conversation, the tools offered, the call's options
and the model's name (``wrap(model, name=...)``, else the model's own ``model_name``)."""
DEFAULT_MATCH_ON = ("messages", "tools", "options")

Kind = Literal["model", "tool"]

# option and header names whose values are credentials, and values that look like one wherever they are
_SECRET_KEY = re.compile(r"(?i)(api[-_]?key|authorization|auth[-_]?token|access[-_]?token|secret|password|cookie)")
_SECRET_VALUE = re.compile(r"^(?:Bearer |Basic |sk-|sk_|xox[abp]-|ghp_|AKIA)\S+")


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
    (``api_key``, ``Authorization``, ``token``, ``secret``, ``password``, ``cookie``, and ``secret_keys``), and
    strings that look like one (``Bearer ...``, ``sk-...``)."""
    extra = {k.lower() for k in secret_keys}

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {
                k: REDACTED if (_SECRET_KEY.search(k) or k.lower() in extra) and v[k] is not None else walk(v[k])
                for k in v
            }
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and _SECRET_VALUE.match(v):
            return REDACTED
        return v

    return walk(value)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (pydantic models dumped; what JSON cannot hold becomes its ``str``)."""
    return to_jsonable_python(value, fallback=str)


def dump_message(msg: Message) -> dict[str, Any]:
    return msg.model_dump(mode="json", exclude_defaults=True)


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
        "messages": [dump_message(m) for m in messages],
        "tools": tools,
        "options": redact(jsonable(dict(options)), secret_keys),
        "model": model,
    }


def tool_request(name: str, arguments: str) -> dict[str, Any]:
    """A tool call as it is recorded: the tool's name and the arguments string as the model wrote it."""
    return {"tool": name, "arguments": arguments}


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
    """The interactions of a cassette file's text.

    Raises:
        CassetteError: the text is not a cassette (names ``where`` and what is wrong).
    """
    try:
        data = json.loads(text)
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
        out.append(Interaction(item["kind"], item["request"], item["response"]))
    return out
