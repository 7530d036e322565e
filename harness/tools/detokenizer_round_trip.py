"""Round-trip check of a detokenizer on word-level benchmark files.

``python -m harness.tools.detokenizer_round_trip FILE... --style wikitext|ptb|none`` detokenizes
every line of each file and tokenizes it back (:func:`~harness.plugins.hf.detokenize.round_trip`),
then prints how many lines do not come back unchanged and where each one first differs.
"""

from __future__ import annotations

import argparse
import sys

from harness.plugins.hf.detokenize import STYLES, round_trip
from wikitext_toolkit_core.cli import ArgumentParser, UsageError, existing_file, run


def _first_difference(original: list[str], again: list[str]) -> str:
    """A few tokens either side of the first token where ``again`` differs from ``original``."""
    index = next(
        (i for i, (a, b) in enumerate(zip(original, again)) if a != b), min(len(original), len(again))
    )
    return (
        f"{' '.join(original[max(0, index - 3) : index + 4])!r} -> "
        f"{' '.join(again[max(0, index - 3) : index + 4])!r}"
    )


def _check(args: argparse.Namespace) -> int:
    for path in args.files:
        try:
            lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        except UnicodeDecodeError as error:
            raise UsageError(f"{path}: not UTF-8 text (at byte {error.start})") from None
        except OSError as error:
            raise UsageError(f"{path}: cannot read it: {error.strerror}") from None
        result = round_trip(lines, args.style)
        print(f"{path}: {len(result.exceptions)} of {result.lines} lines do not round-trip")
        for number, original, again in result.exceptions:
            print(f"  line {number}: {_first_difference(original, again)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.tools.detokenizer_round_trip``; returns the exit status (2 and one
    line for a file that cannot be read)."""
    parser = ArgumentParser(
        prog="python -m harness.tools.detokenizer_round_trip",
        description="Round-trip check of a detokenizer on a file.",
    )
    parser.add_argument("files", nargs="+", type=existing_file)
    parser.add_argument("--style", choices=STYLES, required=True)
    parser.set_defaults(handler=_check)
    return run(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
