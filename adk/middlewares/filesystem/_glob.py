"""Doublestar glob matching without backtracking: ``*`` within a part, ``**`` across parts, ``?``, ``[...]``,
``{a,b}`` and ``\\`` escapes.

A pattern is compiled once into a bit-parallel automaton (one bit per position of the pattern, the ``{a,b}``
alternatives laid side by side), and a name is matched in one pass over its characters: the time is linear in
the name's length whatever the pattern (a backtracking regex takes exponential time on ``*a*a*a*...*b``, holding
the interpreter lock all along). The pattern is bounded: at most :data:`MAX_GLOB_CHARS` characters and
:data:`MAX_GLOB_ALTERNATIVES` brace alternatives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from adk.errors import GrepPatternError

__all__ = ["MAX_GLOB_ALTERNATIVES", "MAX_GLOB_CHARS", "Glob", "compile_glob"]

MAX_GLOB_CHARS = 1024
MAX_GLOB_ALTERNATIVES = 256

# a position of the pattern: what it consumes, and the positions reachable from it without consuming
_LIT, _ONE, _CLASS, _STAR, _ANY, _SKIP = range(6)


@dataclass(frozen=True, slots=True)
class _Pos:
    kind: int  # _LIT: the char; _ONE: one non-'/' char; _CLASS: one char of `cls`; _STAR: stay on non-'/';
    # _ANY: stay on any char; _SKIP: consumes nothing (the entry of `**/`)
    char: str = ""
    cls: re.Pattern[str] | None = None
    skip: int = 0  # 1: the next position is reachable without consuming; 3: that one too, and `**/` skipped whole


def _class(p: str, i: int, end: int) -> tuple[_Pos, int]:
    close = p.find("]", i + 2 if i + 1 < end and p[i + 1] in "!^" else i + 1)
    if close == -1 or close >= end:
        raise ValueError("unclosed '['")
    body = p[i + 1 : close]
    negate = body[:1] in ("!", "^")
    body = (body[1:] if negate else body).replace("\\", "\\\\").replace("[", "\\[")
    return _Pos(_CLASS, cls=re.compile(f"[^/{body}]" if negate else f"(?!/)[{body}]")), close


def _expand(p: str, i: int, end: int, *, in_brace: bool = False) -> tuple[list[list[_Pos]], int]:
    """The alternatives of ``p[i:end]`` (braces expanded), each a list of positions, and where it stopped."""
    seqs: list[list[_Pos]] = [[]]

    def add(*positions: _Pos) -> None:
        for seq in seqs:
            seq.extend(positions)

    while i < end:
        c = p[i]
        if c == "*":
            if p.startswith("**", i) and (i == 0 or p[i - 1] == "/") and (i + 2 == end or p[i + 2] == "/"):
                if i + 2 == end:
                    add(_Pos(_ANY, skip=1))
                    i += 2
                else:  # `(.*/)?`: skipped whole, or any chars then a '/'
                    add(_Pos(_SKIP, skip=3), _Pos(_ANY, skip=1), _Pos(_LIT, "/"))
                    i += 3
                continue
            while i < end and p[i] == "*":
                i += 1
            add(_Pos(_STAR, skip=1))
            continue
        if c == "?":
            add(_Pos(_ONE))
        elif c == "[":
            pos, i = _class(p, i, end)
            add(pos)
        elif c == "{":
            alternatives: list[list[_Pos]] = []
            i += 1
            while True:
                alt, i = _expand(p, i, end, in_brace=True)
                alternatives.extend(alt)
                if i >= end:
                    raise ValueError("unclosed '{'")
                if p[i] == "}":
                    break
                i += 1  # the ','
            if len(seqs) * len(alternatives) > MAX_GLOB_ALTERNATIVES:
                raise ValueError(f"its braces make more than {MAX_GLOB_ALTERNATIVES} alternatives")
            seqs = [seq + alt for seq in seqs for alt in alternatives]
        elif in_brace and c in ",}":
            return seqs, i
        elif c == "\\" and i + 1 < end:
            i += 1
            add(_Pos(_LIT, p[i]))
        else:
            add(_Pos(_LIT, c))
        i += 1
    return seqs, i


class Glob:
    """A compiled doublestar pattern (see the module docstring); ``match(name)`` is a whole-name match."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_GLOB_CHARS:
            raise GrepPatternError(f"invalid glob pattern: {pattern[:64]!r}...: it is longer than {MAX_GLOB_CHARS}")
        try:
            seqs, _ = _expand(pattern, 0, len(pattern))
        except (ValueError, re.error) as exc:
            raise GrepPatternError(f"invalid glob pattern: {pattern!r}: {exc}") from exc
        self.pattern = pattern
        self._literals: dict[str, int] = {}
        self._classes: list[tuple[int, re.Pattern[str]]] = []
        self._one = self._star = self._any = self._skip1 = self._skip3 = self._start = self._accept = 0
        bit = 0
        for seq in seqs:  # each alternative's positions, then its accepting bit (which no mask holds)
            self._start |= 1 << bit
            for pos in seq:
                b = 1 << bit
                if pos.kind == _LIT:
                    self._literals[pos.char] = self._literals.get(pos.char, 0) | b
                elif pos.kind == _ONE:
                    self._one |= b
                elif pos.kind == _CLASS:
                    assert pos.cls is not None
                    self._classes.append((b, pos.cls))
                elif pos.kind == _STAR:
                    self._star |= b
                elif pos.kind == _ANY:
                    self._any |= b
                if pos.skip == 1:
                    self._skip1 |= b
                elif pos.skip == 3:
                    self._skip1 |= b
                    self._skip3 |= b
                bit += 1
            self._accept |= 1 << bit
            bit += 1
        self._consumes: dict[str, int] = {}
        self._initial = self._close(self._start)

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"

    def _close(self, state: int) -> int:
        while True:
            grown = state | ((state & self._skip1) << 1) | ((state & self._skip3) << 3)
            if grown == state:
                return state
            state = grown

    def _consuming(self, c: str) -> int:
        """The positions that consume ``c`` and move on."""
        mask = self._consumes.get(c)
        if mask is None:
            mask = self._literals.get(c, 0)
            if c != "/":
                mask |= self._one
            for b, cls in self._classes:
                if cls.fullmatch(c):
                    mask |= b
            if len(self._consumes) > 4096:
                self._consumes.clear()
            self._consumes[c] = mask
        return mask

    def match(self, name: str) -> bool:
        """Does the whole ``name`` match?"""
        state = self._initial
        stay_any, stay_star = self._any, self._star | self._any
        for c in name:
            moved = ((state & self._consuming(c)) << 1) | (state & (stay_any if c == "/" else stay_star))
            state = self._close(moved)
            if not state:
                return False
        return bool(state & self._accept)


@lru_cache(maxsize=256)
def compile_glob(pattern: str) -> Glob:
    """The compiled ``pattern`` (cached).

    Raises:
        GrepPatternError: the pattern is malformed or too big.
    """
    return Glob(pattern)
