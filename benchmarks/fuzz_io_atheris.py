"""Coverage-guided fuzzing of the instance and plan loaders with atheris (optional).

Usage (atheris is not a dependency: ``pip install atheris``; wheels exist for CPython
3.11 on x86-64 Linux)::

    python benchmarks/fuzz_io_atheris.py -runs=100000          # libFuzzer flags
    python benchmarks/fuzz_io_atheris.py -max_total_time=600 corpus_dir/

Each input is written to a file and loaded with :func:`slackopt.io.load_instance`, then
as a plan of ``tests/test_io.small_instance`` with :func:`slackopt.io.load_plan`. Any
exception other than :class:`slackopt.errors.FileFormatError` (which must name the file)
is a crash and stops the run with the input saved by libFuzzer. The corpus is seeded with
a valid instance file and a valid plan file. tests/test_fuzz_io.py runs it for 30 inputs
when asked to (``SLACKOPT_ATHERIS=1``; atheris instruments its imports for about 45 s
first); CI runs the hypothesis fuzz tests of that module instead.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package

import atheris  # noqa: E402

with atheris.instrument_imports():
    from slackopt import io  # noqa: E402
    from slackopt.errors import FileFormatError  # noqa: E402

from slackopt.plan import Plan  # noqa: E402
from tests.test_io import small_instance  # noqa: E402

INSTANCE = small_instance()
TMP = Path(tempfile.mkdtemp(prefix="slackopt-atheris-"))
PATH = TMP / "input.json"


def _seed(corpus: Path) -> None:
    io.save_instance(INSTANCE, corpus / "instance.json", overwrite=True)
    io.save_plan(Plan.keep_all(INSTANCE), corpus / "plan.json", INSTANCE, overwrite=True)


def test_one_input(data: bytes) -> None:
    PATH.write_bytes(data)
    for load in (io.load_instance, lambda p: io.load_plan(p, INSTANCE)):
        try:
            load(PATH)
        except FileFormatError as e:
            if str(PATH) not in str(e):
                raise AssertionError(f"error does not name the file: {e}") from None


def main() -> None:
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = TMP / "corpus"
        corpus.mkdir()
        _seed(corpus)
        args.append(str(corpus))
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
