"""The files ``slackopt bench --out F.csv`` writes: the per-row table ``F.csv``, the
leaderboard as markdown ``F.leaderboard.md`` and as a figure ``F.leaderboard.png``.

:func:`check_bench_out` refuses, before any run, an output that is a file the bench reads
(the suite's manifest, its references, their plan files, an instance; even with
``overwrite``) or an existing one without ``overwrite``; :func:`write_bench_out` writes
the three files of a :class:`~slackopt.compare.bench.BenchResult`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from slackopt.compare.bench import leaderboard_markdown, load_manifest, resolve_suite
from slackopt.compare.files import check_results_out, write_results
from slackopt.compare.gaps import load_references

if TYPE_CHECKING:  # pragma: no cover
    from slackopt.compare.bench import BenchResult

PathLike = str | os.PathLike[str]


def leaderboard_paths(out: PathLike) -> tuple[Path, Path]:
    """The leaderboard files beside a results file: ``STEM.leaderboard.md`` and
    ``STEM.leaderboard.png`` (``r.csv`` -> ``r.leaderboard.md``, ``r.leaderboard.png``)."""
    stem = Path(out).with_suffix("")
    return (stem.with_name(stem.name + ".leaderboard.md"),
            stem.with_name(stem.name + ".leaderboard.png"))


def bench_reads(suite: PathLike, references: PathLike | None = None
                ) -> list[tuple[str, Path]]:
    """The files a bench of `suite` reads, as (role, path): the manifest, the references
    file (`references`, else the suite's ``references.json``), the plan files its rows
    name and every instance of the manifest.

    Raises:
        SlackoptError / FileFormatError: a suite that cannot be found or read, or a
            malformed references file.
    """
    st = load_manifest(resolve_suite(suite))
    refs = Path(references or st.references)
    reads = [("the suite's manifest", st.manifest), ("the references file", refs)]
    if refs.is_file():
        reads += [("a reference plan", refs.parent / e["best_plan"])
                  for e in load_references(refs) if e.get("best_plan")]
    return reads + [("an instance of the suite", e.path) for e in st.instances]


def check_bench_out(out: PathLike, suite: PathLike, *, references: PathLike | None = None,
                    store: PathLike | None = None, overwrite: bool = False) -> None:
    """Check the three files of ``bench --out`` before the bench runs.

    Args:
        out: the results file (``.csv``, ``.json``, ``.parquet`` or ``.sqlite``).
        suite: the suite, as :func:`~slackopt.compare.bench.run_bench` takes it.
        references: the references file given, or None for the suite's.
        store: the ``--store`` file, or None.
        overwrite: replace existing files (``--force``).

    Raises:
        FileFormatError: any of the three is a file the bench reads (:func:`bench_reads`;
            whatever `overwrite` says), `out` as :func:`check_results_out` refuses it.
        OutputExistsError: one of them exists and `overwrite` is False.
    """
    from slackopt.io.outputs import check_output

    reads = bench_reads(suite, references)
    check_results_out(out, store=store, reads=reads, overwrite=overwrite, reader="bench")
    for f in leaderboard_paths(out):
        check_output(f, reads=reads, overwrite=overwrite, reader="bench",
                     fix="write the results elsewhere with --out", what="another --out")


def leaderboard_title(res: BenchResult) -> str:
    """The leaderboard's title: how many instances of which manifest, how many runs, and
    what the gaps are measured against."""
    return (f"Leaderboard: {len(res.suite.instances)} instances of {res.suite.manifest}, "
            f"{len(res.table)} runs; gaps against "
            + (f"the references {res.references}" if res.references else "T* and the rows' "
               "own bounds (no references file)"))


def write_bench_out(res: BenchResult, out: PathLike, *, overwrite: bool = False
                    ) -> list[str]:
    """Write the results table, the leaderboard markdown (with the new best known plans and
    the bound violations below it) and the leaderboard figure.

    Returns:
        The paths written, in that order.

    Raises:
        OutputExistsError: a file exists and `overwrite` is False.
        FileFormatError: a file cannot be written.
    """
    from slackopt import plot

    md_path, png_path = leaderboard_paths(out)
    written = [str(write_results(res.table, out, overwrite=overwrite))]
    md = leaderboard_markdown(res.board, f"## {leaderboard_title(res)}")
    for n in res.new_bests:
        md += (f"\nNew best known: {n['instance']} at {n['budget_fraction']:g} P: "
               f"{n['solver']} runs in {n['step_time_s']!r} s (reference "
               f"{n['reference_best_s']!r} s); record it with `{n['command']}`\n")
    for v in res.violations:
        md += f"\nBUG: {v['instance']} at {v['budget_fraction']:g} P: {v['problem']}\n"
    md_path.write_text(md, encoding="utf-8")
    written.append(str(md_path))
    written.append(str(plot.save(plot.leaderboard(res.board), png_path)))
    return written


__all__ = ["bench_reads", "check_bench_out", "leaderboard_paths", "leaderboard_title",
           "write_bench_out"]
