"""The checkpoint envelope: a one-line JSON header (format version, kind, writer's fingerprint, time written,
digest) followed by the payload as JSON, both through pydantic (never pickle)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from compose.errors import CheckpointError

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "CHECKPOINT_KEY_ENV",
    "CheckpointHeader",
    "decode_checkpoint",
    "encode_checkpoint",
    "read_checkpoint_header",
]

M = TypeVar("M", bound=BaseModel)

CHECKPOINT_FORMAT_VERSION = 1
"""The envelope format this pyeino writes and the only one it reads."""

CHECKPOINT_KEY_ENV = "PYEINO_CHECKPOINT_KEY"
"""Environment variable holding the HMAC key for checkpoints (used when ``key=`` is not given)."""

_FORMAT: Final = "pyeino-checkpoint"
_FRESH = "use force_new_run=True to start a fresh run, or delete the checkpoint"


class CheckpointHeader(BaseModel):
    """The first line of a checkpoint: what wrote it and how to check it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal["pyeino-checkpoint"]
    version: int
    kind: str
    fingerprint: str
    written_at: float
    """Unix time of writing (informational)."""
    digest: str
    """``sha256:<hex>`` or ``hmac-sha256:<hex>`` over the header fields above and the payload bytes."""


def encode_checkpoint(payload: BaseModel, *, kind: str, fingerprint: str, key: bytes | str | None = None) -> bytes:
    """Serialise ``payload`` into a checkpoint envelope.

    Args:
        payload: the pydantic model to store; serialised with ``model_dump_json`` (a value its fields do not
            describe is an error, not a silent loss).
        kind: what the payload is, e.g. ``"graph-run"``; :func:`decode_checkpoint` insists on the same kind.
        fingerprint: identifies the writer (e.g. a hash of the compiled graph's structure); a reader with
            another fingerprint refuses the checkpoint.
        key: HMAC key; defaults to ``$PYEINO_CHECKPOINT_KEY``; without one the digest is a plain SHA-256.

    Raises:
        CheckpointError: (reason ``"encode"``) the payload holds a value pydantic cannot serialise.

    Example:
        >>> from pydantic import BaseModel
        >>> class Run(BaseModel):
        ...     step: int
        >>> data = encode_checkpoint(Run(step=3), kind="graph-run", fingerprint="g1", key=b"k")
        >>> decode_checkpoint(data, Run, kind="graph-run", fingerprint="g1", key=b"k")
        Run(step=3)
    """
    try:
        body = payload.model_dump_json(warnings="error").encode()
    except PydanticSerializationError as e:
        where = _unserialisable_path(payload.model_dump(mode="python", warnings=False))
        raise CheckpointError(
            f"cannot write a {kind!r} checkpoint: "
            + (f"the value at {where}" if where else "a value in it")
            + f" cannot be serialised as JSON ({e}); keep JSON-serialisable data (or pydantic models) there",
            reason="encode",
        ) from e
    secret = _resolve_key(key)
    written_at = time.time()
    digest = _digest(secret, CHECKPOINT_FORMAT_VERSION, kind, fingerprint, written_at, body)
    header = CheckpointHeader(
        format=_FORMAT,
        version=CHECKPOINT_FORMAT_VERSION,
        kind=kind,
        fingerprint=fingerprint,
        written_at=written_at,
        digest=digest,
    )
    return header.model_dump_json().encode() + b"\n" + body


def read_checkpoint_header(data: bytes) -> CheckpointHeader:
    """Return the header of a checkpoint without checking its digest or reading its payload.

    For tools that list or inspect checkpoints. Raises :class:`CheckpointError` (reason ``"not_checkpoint"``
    or ``"version"``) like :func:`decode_checkpoint`.
    """
    return _split(data)[0]


def decode_checkpoint(data: bytes, model: type[M], *, kind: str, fingerprint: str, key: bytes | str | None = None) -> M:
    """Check a checkpoint envelope and return its payload as ``model``.

    Checks, in order: the bytes are an envelope, of format version :data:`CHECKPOINT_FORMAT_VERSION`, of
    ``kind``; the digest matches (an HMAC with ``key`` or ``$PYEINO_CHECKPOINT_KEY`` when one is configured;
    then unsigned checkpoints are refused); it was written by ``fingerprint``; the payload validates as
    ``model``.

    Raises:
        CheckpointError: the first check that failed, as ``reason``, with a message saying what to do.
    """
    header, body = _split(data)
    if header.kind != kind:
        raise CheckpointError(
            f"checkpoint holds a {header.kind!r}, not a {kind!r}: it was written by another kind of runnable; "
            f"resume it with what wrote it, or {_FRESH}",
            reason="kind",
        )
    _check_digest(header, body, _resolve_key(key))
    if header.fingerprint != fingerprint:
        raise CheckpointError(
            f"checkpoint was written by a different {kind} (fingerprint {header.fingerprint!r}, this one is "
            f"{fingerprint!r}): its structure changed since the run was interrupted; resume with the "
            f"{kind} that wrote it, or {_FRESH}",
            reason="fingerprint",
        )
    try:
        return model.model_validate_json(body)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in e.errors()[:3]
        )
        more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
        raise CheckpointError(
            f"checkpoint payload does not validate as {model.__name__}: {problems}{more}; it was written by "
            f"an incompatible version of the code; {_FRESH}",
            reason="payload",
        ) from e


def _unserialisable_path(data: Any, path: str = "") -> str:
    """The dotted path (``state.conn``, ``pending.0.1``) of the first value in ``data`` that is not JSON, or ``""``."""
    items: Any = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, (list, tuple)) else ()
    for key, item in items:
        inner = f"{path}.{key}" if path else str(key)
        found = _unserialisable_path(item, inner)
        if found:
            return found
    if items == ():
        try:
            _JSON_ANY.dump_json(data, warnings="error")
        except PydanticSerializationError:
            return f"{path or 'its top'} ({type(data).__qualname__})"
    return ""


_JSON_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def _resolve_key(key: bytes | str | None) -> bytes | None:
    if key is None:
        key = os.environ.get(CHECKPOINT_KEY_ENV) or None
    if isinstance(key, str):
        key = key.encode()
    return key or None


def _digest(key: bytes | None, version: int, kind: str, fingerprint: str, written_at: float, body: bytes) -> str:
    # the header fields are framed as one JSON array so no two field combinations share a byte string
    signed = json.dumps([_FORMAT, version, kind, fingerprint, written_at]).encode() + b"\n" + body
    if key is None:
        return "sha256:" + hashlib.sha256(signed).hexdigest()
    return "hmac-sha256:" + hmac.new(key, signed, hashlib.sha256).hexdigest()


def _not_checkpoint(why: str) -> CheckpointError:
    return CheckpointError(
        f"not a pyeino checkpoint ({why}): the bytes were corrupted or written by something else; {_FRESH}",
        reason="not_checkpoint",
    )


def _split(data: bytes) -> tuple[CheckpointHeader, bytes]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _not_checkpoint(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    line, newline, body = data.partition(b"\n")
    if not newline:
        raise _not_checkpoint("no header line")
    try:
        raw: Any = json.loads(line)
    except ValueError:
        raise _not_checkpoint("the header is not JSON") from None
    if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
        raise _not_checkpoint("the header does not name the pyeino-checkpoint format")
    version = raw.get("version")
    if version != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint format version {version!r} is not supported (this pyeino reads version "
            f"{CHECKPOINT_FORMAT_VERSION}): it was written by another pyeino release; resume it with that "
            f"release, or {_FRESH}",
            reason="version",
        )
    try:
        header = CheckpointHeader.model_validate(raw)
    except ValidationError as e:
        raise _not_checkpoint(f"malformed header: {e.errors()[0]['msg']}") from None
    return header, body


def _check_digest(header: CheckpointHeader, body: bytes, key: bytes | None) -> None:
    signed = header.digest.startswith("hmac-sha256:")
    if signed and key is None:
        raise CheckpointError(
            f"checkpoint is signed (HMAC) but no key is configured: set {CHECKPOINT_KEY_ENV} (or pass key=) "
            "to the key it was written with",
            reason="digest",
        )
    if not signed and key is not None:
        raise CheckpointError(
            "checkpoint is not signed but a key is configured: refusing an unauthenticated checkpoint; "
            f"it was written without {CHECKPOINT_KEY_ENV}; {_FRESH}",
            reason="digest",
        )
    expected = _digest(key, header.version, header.kind, header.fingerprint, header.written_at, body)
    if not hmac.compare_digest(expected, header.digest):
        what = "wrong key, or the checkpoint was tampered with" if signed else "corrupted or tampered with"
        raise CheckpointError(
            f"checkpoint digest mismatch ({what}): its bytes changed after it was written; {_FRESH}",
            reason="digest",
        )
