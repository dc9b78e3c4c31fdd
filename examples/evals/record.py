"""Re-record ``cassette.json``: run the dataset's five cases against a real OpenAI-compatible model and keep every
model and tool call (mode ``all``; the API key is never written).

    OPENAI_API_KEY=sk-... python examples/evals/record.py            # OPENAI_MODEL, OPENAI_BASE_URL as usual
    python examples/evals/record.py --out /tmp/cassette.json          # somewhere else

Then everyone (and CI) evaluates offline on it::

    python -m adk.evals run examples/evals/dataset.yaml examples.evals.travel:build \\
        --cassette examples/evals/cassette.json --cassette-mode none
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root: `examples.evals.travel` imports from there

from adk.evals import Dataset  # noqa: E402
from compose.testing import cassette  # noqa: E402
from examples.evals.travel import build  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(HERE / "cassette.json"), help="the cassette file to write")
    args = parser.parse_args(argv)
    dataset = Dataset.from_file(HERE / "dataset.yaml")
    # one case at a time: the file then lists each case's calls together
    report = dataset.evaluate_sync(build, cassette=cassette(args.out, "all"), concurrency=1)
    report.print()
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
