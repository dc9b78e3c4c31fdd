"""The grep worker: a child process that matches one regular expression against file contents.

Python's ``re`` backtracks, and a pattern such as ``(a+)+$`` takes exponential time on a line of ``a``; it holds
the interpreter lock for the whole match, so neither a worker thread nor a deadline checked between lines can stop
it. Run here, in its own process (``python -I -S _grep_worker.py``, standard library only), the match is killed
at the backend's deadline (``adk.middlewares.filesystem._search``).

Reads one JSON object from stdin: ``pattern`` and ``flags`` (a compiled ``re.Pattern``'s), ``multiline``,
``files`` (their contents) and ``max_lines``; writes one JSON object: ``{"found": [[line, ...], ...]}``, for each
file the numbers (1-based) of its matching lines, or ``{"over": N}`` when more than ``max_lines`` lines matched.
"""

from __future__ import annotations

import json
import re
import sys


def matching_lines(regex: re.Pattern[str], content: str, multiline: bool, limit: int) -> list[int]:
    """The numbers of the lines of ``content`` the regex finds something in, or (``multiline``) of every line a
    match of the whole content spans, once per match (Eino's ``findMultilineMatches``); it stops past ``limit``."""
    found: list[int] = []
    if not multiline:
        for n, text in enumerate(content.split("\n"), 1):
            if regex.search(text):
                found.append(n)
                if len(found) > limit:
                    break
        return found
    last_line = content.count("\n") + 1
    line, pos = 1, 0
    for m in regex.finditer(content):
        line += content.count("\n", pos, m.start())
        pos = m.start()
        end = line + content.count("\n", m.start(), m.end())
        found.extend(range(line, min(end, last_line) + 1))
        if len(found) > limit:
            break
    return found


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    regex = re.compile(job["pattern"], job["flags"])
    found: list[list[int]] = []
    room = job["max_lines"]
    for content in job["files"]:
        lines = matching_lines(regex, content, job["multiline"], room)
        room -= len(lines)
        if room < 0:
            sys.stdout.write(json.dumps({"over": job["max_lines"]}))
            return
        found.append(lines)
    sys.stdout.write(json.dumps({"found": found}))


if __name__ == "__main__":
    main()
