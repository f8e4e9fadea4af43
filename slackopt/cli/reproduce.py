"""``slackopt reproduce``: the paper's figures and tables regenerated, with a report that
puts every number beside the paper's (:mod:`slackopt.experiments.reproduce`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from slackopt.cli._errors import RERUN, Interrupted, guarded
from slackopt.cli._options import ForceOpt, JsonOpt
from slackopt.cli._output import console
from slackopt.errors import interrupt_cause

SHORT_HELP = "The paper's Figures 4, 5, 6a, 6b, GPU generations, Tables 2, 3."


def _file_stamps(folder: Path) -> dict[str, int]:
    """{name: modification time (ns)} of the files directly in `folder` ({} if none)."""
    if not folder.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


def _kept_line(folder: Path, before: Mapping[str, int]) -> str:
    """The interrupt line of an interrupted reproduce: the files of `folder` written since
    `before` (:func:`_file_stamps` at the start) stay there; a rerun writes them again."""
    written = sorted(n for n, t in _file_stamps(folder).items() if before.get(n) != t)
    if not written:
        return RERUN
    return (f"kept {', '.join(written)} in {folder}, written before Ctrl-C (this run wrote "
            "no report.md); run the same command again to make them all")


@guarded
def reproduce_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for report.md, the PNG "
                                      "figures and the CSV tables; one that already holds a "
                                      "report.md is refused unless --force.")],
    quick: Annotated[bool, typer.Option("--quick", help="Fewer budgets and a 5 s genetic "
                                        "search: a few times faster (docs/figures.md)."
                                        )] = False,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Local worker processes "
                                         "for the sweeps.")] = 2,
    tiny: Annotated[bool, typer.Option("--tiny", hidden=True,
                                       help="Scaled-down workloads (tests only).")] = False,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> dict[str, Any] | None:
    """Regenerate the paper's Figures 4, 5, 6a and 6b, the GPU generations (section 4.5),
    Tables 2 and 3 and the VGG-16 vDNN check, with a report that puts every number beside
    the paper's."""
    from slackopt.experiments.reproduce import reproduce
    from slackopt.io import OutputExistsError

    if (out / "report.md").exists() and not force:  # reproduce reads no file
        raise OutputExistsError(f"{out} already holds a reproduction (report.md); pass --force "
                                "to replace its files, or choose another --out")
    before = _file_stamps(out)
    try:
        res = reproduce(out, quick=quick, workers=workers, progress=sys.stderr.isatty(),
                        _tiny=tiny)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt) or isinstance(interrupt_cause(e), KeyboardInterrupt):
            raise Interrupted(_kept_line(out, before)) from None
        raise
    doc = res.to_dict()
    if json_output:
        return doc
    con = console()
    con.print(f"{doc['reproduced']} of {doc['compared']} numbers the paper states reproduce "
              f"within tolerance ({res.wall_s:.0f} s); see {res.files[0]}")
    for p in res.files[1:]:
        con.print(f"wrote {p}")
    return None
