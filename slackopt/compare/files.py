"""Results tables in files: :func:`write_results` (.csv, .json, .parquet, .sqlite) and
:func:`read_results` (those, or the runs of a store, with their gaps)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slackopt.compare.gaps import add_gaps
from slackopt.compare.table import coerce
from slackopt.errors import FileFormatError, SlackoptError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

RESULTS_FORMAT = "slackopt-compare-results"
RESULT_SUFFIXES = (".csv", ".json", ".parquet", ".sqlite")


def write_results(df: pd.DataFrame, path: str | os.PathLike, *, overwrite: bool = False
                  ) -> Path:
    """Write a results table by suffix: .csv, .json (versioned document), .parquet (needs
    pyarrow) or .sqlite (table ``results``).

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
        FileFormatError: an unknown suffix, or the file cannot be written.
    """
    from slackopt.io import OutputExistsError

    p = Path(path)
    suf = p.suffix.lower()
    if suf not in RESULT_SUFFIXES:
        raise FileFormatError(p, "", f"unknown results format '{suf or '(none)'}'",
                              f"use one of {', '.join(RESULT_SUFFIXES)}")
    if p.exists() and not overwrite:
        raise OutputExistsError(f"{p}: file exists; pass --force (overwrite=True) to replace "
                                "it, or choose another path")
    if p.is_dir():
        raise FileFormatError(p, "", "is a directory", "give a file path")
    tmp = p.parent / f".{p.name}.{os.getpid()}.tmp"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if suf == ".csv":
            df.to_csv(tmp, index=False)
        elif suf == ".json":
            recs = json.loads(df.to_json(orient="records", double_precision=15))
            doc = {"format": RESULTS_FORMAT, "schema_version": 1, "columns": list(df.columns),
                   "rows": recs}
            tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        elif suf == ".parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise FileFormatError(p, "", "Parquet needs pyarrow, which is not installed",
                                      "pip install pyarrow, or write .csv/.json/.sqlite") \
                    from None
            df.to_parquet(tmp, index=False)
        else:
            con = sqlite3.connect(str(tmp))
            try:
                df.to_sql("results", con, index=False)
            finally:
                con.close()
        os.replace(tmp, p)
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e})", "check the directory") \
            from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def check_results_out(path: str | os.PathLike, *, store: str | os.PathLike | None = None,
                      reads: Iterable[tuple[str, str | os.PathLike | None]] = (),
                      overwrite: bool = False, reader: str = "command") -> None:
    """Check a results file before a sweep runs (``compare --out``, ``bench --out``), so a
    refused file costs no run: a results suffix (:data:`RESULT_SUFFIXES`), none of the
    files the sweep reads (`reads`: (role, path) pairs, `reader` naming who reads:
    :func:`slackopt.io.outputs.check_output`),
    not an existing file unless `overwrite`, not the `store`, pyarrow present for Parquet,
    and no file where its folder would be.

    Raises:
        FileFormatError: an unknown suffix, a file the sweep reads, the store, Parquet
            without pyarrow, or a file on the way to its folder (each with the fix).
        OutputExistsError: the file exists and `overwrite` is False.
    """
    import importlib.util

    from slackopt.io.outputs import check_output, same_file

    p = Path(path)
    if p.suffix.lower() not in RESULT_SUFFIXES:
        raise FileFormatError(p, "", f"unknown results format '{p.suffix or '(none)'}'",
                              f"end the file name with one of {', '.join(RESULT_SUFFIXES)}")
    check_output(p, reads=reads, overwrite=overwrite, reader=reader,
                 fix="write the results elsewhere with --out")
    if store is not None and same_file(p, store):
        raise FileFormatError(p, "", "is also the --store file",
                              "write the table to another file")
    if p.suffix.lower() == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise FileFormatError(p, "", "Parquet needs pyarrow, which is not installed",
                              "pip install pyarrow, or write .csv, .json or .sqlite")
    above = p.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.exists() and not above.is_dir():
        raise FileFormatError(p, "", f"cannot be written: {above} is a file, not a "
                              "folder", "choose another path for --out")


def read_results(path: str | os.PathLike, references: Any = None) -> pd.DataFrame:
    """Read a results table written by :func:`write_results` (or ``slackopt compare
    --out``), or the runs of a store; returns it with :data:`SCHEMA`'s dtypes.

    A store has no gap columns; they are computed here (with `references`, if given).

    Raises:
        FileFormatError: missing file, unknown suffix, or not a results table.
    """
    import pandas as pd

    p = Path(path)
    suf = p.suffix.lower()
    if not p.exists():
        raise FileFormatError(p, "", "file not found", "check the path")
    if suf not in RESULT_SUFFIXES + (".db",):
        raise FileFormatError(p, "", f"unknown results format '{suf or '(none)'}'",
                              f"give a {', '.join(RESULT_SUFFIXES)} file from slackopt compare")
    try:
        if suf == ".csv":
            df = pd.read_csv(p, keep_default_na=True, dtype={"params": str, "message": str})
        elif suf == ".json":
            doc = json.loads(p.read_text(encoding="utf-8"))
            if isinstance(doc, Mapping) and isinstance(doc.get("rows"), list):
                df = pd.DataFrame(doc["rows"])
            elif isinstance(doc, list):
                df = pd.DataFrame(doc)
            else:
                raise FileFormatError(p, "rows", "missing", "give the JSON that slackopt "
                                      "compare --out or --json wrote")
        elif suf == ".parquet":
            df = pd.read_parquet(p)
        else:
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                tables = {t for (t,) in con.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
                if "results" in tables:
                    df = pd.read_sql_query("SELECT * FROM results", con)
                elif "runs" in tables:
                    df = pd.read_sql_query("SELECT * FROM runs", con)
                    df = df.drop(columns=["key", "finished_at"], errors="ignore")
                    df = add_gaps(coerce(df), references)
                else:
                    raise FileFormatError(p, "", "has no 'results' or 'runs' table",
                                          "give a file slackopt compare wrote")
            finally:
                con.close()
    except SlackoptError:
        raise
    except Exception as e:  # pandas / sqlite / pyarrow parse errors
        raise FileFormatError(p, "", f"cannot be read as a results table ({type(e).__name__}: "
                              f"{e})", "give a file slackopt compare wrote") from None
    missing = [c for c in ("instance", "budget_fraction", "solver", "status") if c not in df]
    if missing:
        raise FileFormatError(p, missing[0], "column missing; not a slackopt compare table",
                              "give a file slackopt compare wrote")
    return coerce(df)
