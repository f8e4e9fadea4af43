"""The resumable store of a sweep: an SQLite file of finished runs, keyed by
:func:`slackopt.compare.grid.run_key`."""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from slackopt.compare.table import SCHEMA, STORED_COLUMNS
from slackopt.errors import FileFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

STORE_FORMAT = "slackopt-compare-store"
STORE_SCHEMA_VERSION = 3
"""Version 2 added the ``policy`` column, version 3 ``bound_source``; a store of an earlier
version is migrated when opened (the columns it lacks are added, empty for its rows: what
they say was not recorded)."""
_MIGRATED_VERSIONS = ("1", "2")
_PLANS_TABLE = "CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, plan TEXT NOT NULL)"
"""The plans of the runs (the plan file document as JSON text, by run key): added to every
store when opened, without a schema version change, since a slackopt without it reads and
writes the runs as before and ignores the table."""
_SQL_TYPE = {"Int64": "INTEGER", "float64": "REAL", "bool": "INTEGER", "object": "TEXT"}
"""SQLite column type of each :data:`~slackopt.compare.table.SCHEMA` dtype."""


class ResultStore:
    """An SQLite file of finished runs (table ``runs``, one row per key).

    Opening creates the file if missing, atomically: the schema is written to a temporary
    file beside it, which is then linked to the path, so a kill never leaves a store
    without its schema. An existing file must be a slackopt compare store of a schema
    version this slackopt reads; anything else (another database, a CSV, a newer schema)
    is refused and left untouched (a store of an earlier schema version, 1 or 2, is migrated:
    :data:`STORE_SCHEMA_VERSION`), with two exceptions that hold no data and are
    completed into an empty store: a 0-byte file, and an SQLite file with no tables (or
    only this module's ``meta`` table with nothing but its own entries, and no other
    object) - what a kill during creation by an older slackopt, or ``touch``, leaves.

    Rows are only added, never replaced, except rows with status ``"error"``: a rerun of
    the sweep runs those again (:meth:`add` then replaces them), since an error is a
    crash or a transient failure rather than the solver's answer. ``"timeout"`` rows are
    answers and are kept.

    Args:
        path: the SQLite file.

    Raises:
        FileFormatError: the file exists but is not a slackopt compare store, or cannot be
            created.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise FileFormatError(self.path, "", "is a directory", "give a file path for the store")
        if not self.path.exists():
            self._create_atomically()
        elif self._check_existing():
            self._complete_empty()
        try:
            self.con = sqlite3.connect(str(self.path), timeout=60)
            self._migrate()
            with self.con:  # added beside the runs of any version (older readers ignore it)
                self.con.execute(_PLANS_TABLE)
        except (OSError, sqlite3.Error) as e:
            raise FileFormatError(self.path, "", f"cannot be opened as a store ({e})",
                                  "check that the directory is writable") from None

    _FIX = "give a new file for --store (or the store an earlier compare wrote)"

    def _check_existing(self) -> bool:
        """Check an existing file; True if it holds nothing and may be made a store."""
        fix = self._FIX
        try:
            with self.path.open("rb") as f:
                head = f.read(16)
        except OSError as e:
            raise FileFormatError(self.path, "", f"cannot be read ({e})", fix) from None
        if not head:
            return True  # 0 bytes: no data to lose
        if head != b"SQLite format 3\x00":
            raise FileFormatError(self.path, "", "exists and is not a slackopt compare store "
                                  "(not an SQLite file); refusing to write to it", fix)
        try:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=60)
            try:
                objects = [(t, n) for (t, n) in con.execute(
                    "SELECT type, name FROM sqlite_master") if not n.startswith("sqlite_")]
                tables = {n for (t, n) in objects if t == "table"}
                meta = (dict(con.execute("SELECT key, value FROM meta").fetchall())
                        if "meta" in tables else {})
            finally:
                con.close()
        except sqlite3.Error as e:
            raise FileFormatError(self.path, "", f"is an SQLite file that cannot be read as a "
                                  f"slackopt compare store ({e}); refusing to write to it",
                                  fix) from None
        if not objects:
            return True  # an SQLite file with no schema at all
        if {n for (_, n) in objects} == {"meta"} and set(meta) <= {"format", "schema_version"} \
                and meta.get("format", STORE_FORMAT) == STORE_FORMAT:
            return True  # our own creation, stopped before the runs table
        if "meta" not in tables:
            raise FileFormatError(self.path, "", "is an SQLite file but not a slackopt compare "
                                  "store (no meta table); refusing to write to it", fix)
        if meta.get("format") != STORE_FORMAT:
            raise FileFormatError(self.path, "meta.format", f"is {meta.get('format')!r}, not "
                                  f"'{STORE_FORMAT}'; refusing to write to it", fix)
        ver = meta.get("schema_version")
        if ver not in (*_MIGRATED_VERSIONS, str(STORE_SCHEMA_VERSION)):
            raise FileFormatError(self.path, "meta.schema_version",
                                  f"store schema version {ver} is not {STORE_SCHEMA_VERSION}, "
                                  "the one this slackopt writes (it migrates versions "
                                  f"{' and '.join(_MIGRATED_VERSIONS)})",
                                  "use the slackopt that wrote it, or a new store file")
        if "runs" not in tables:
            raise FileFormatError(self.path, "runs", "table missing from a slackopt compare "
                                  "store that holds other data; refusing to write to it", fix)
        return False

    @staticmethod
    def _write_schema(con: sqlite3.Connection) -> None:
        cols = ", ".join(f'"{c}" {_SQL_TYPE[SCHEMA[c]]}' for c in STORED_COLUMNS)
        con.isolation_level = None  # explicit transaction: all of the schema or none
        con.execute("BEGIN IMMEDIATE")
        con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                        [("format", STORE_FORMAT),
                         ("schema_version", str(STORE_SCHEMA_VERSION))])
        con.execute(f"CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, {cols}, "
                    "finished_at TEXT)")
        con.execute(_PLANS_TABLE)
        con.execute("COMMIT")

    def _migrate(self) -> None:
        """Bring a store of an earlier version to this one: add the columns it lacks (empty
        for its rows), in one transaction with the version change."""
        con = self.con
        if set(STORED_COLUMNS) <= {r[1] for r in con.execute("PRAGMA table_info(runs)")}:
            return
        con.isolation_level = None
        con.execute("BEGIN IMMEDIATE")
        try:  # columns read again under the lock: another process may have migrated
            have = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
            for c in STORED_COLUMNS:
                if c not in have:
                    con.execute(f'ALTER TABLE runs ADD COLUMN "{c}" {_SQL_TYPE[SCHEMA[c]]}')
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                        (str(STORE_SCHEMA_VERSION),))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.isolation_level = ""

    def _create_atomically(self) -> None:
        tmp = self.path.parent / f".{self.path.name}.{os.getpid()}.creating"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(str(tmp))
            try:
                self._write_schema(con)
            finally:
                con.close()
            try:
                os.link(tmp, self.path)  # fails if another process created it meanwhile
            except FileExistsError:
                pass
        except (OSError, sqlite3.Error) as e:
            raise FileFormatError(self.path, "", f"cannot be created as a store ({e})",
                                  "check that the directory is writable") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        if self._check_existing():  # another process's empty file won the race
            self._complete_empty()

    def _complete_empty(self) -> None:
        try:
            con = sqlite3.connect(str(self.path), timeout=60)
            try:
                self._write_schema(con)
            finally:
                con.close()
        except sqlite3.Error as e:
            raise FileFormatError(self.path, "", f"cannot be made a store ({e})",
                                  self._FIX) from None

    def keys(self) -> set[str]:
        """Keys of the stored runs."""
        return {k for (k,) in self.con.execute("SELECT key FROM runs")}

    def add(self, key: str, row: Mapping[str, Any], plan: str | None = None) -> bool:
        """Store one run unless its key is there already (an ``"error"`` row under the key
        is replaced); commits at once.

        Args:
            key: the run key (:func:`slackopt.compare.grid.run_key`).
            row: the run's columns (:data:`~slackopt.compare.table.STORED_COLUMNS`).
            plan: the run's plan as a plan file document in JSON text, or None; kept in
                the ``plans`` table with the row (:meth:`plans`).

        Returns:
            True if the row was added, False if the key was already stored.
        """
        vals = [key] + [_sql_value(row.get(c)) for c in STORED_COLUMNS] + \
            [time.strftime("%Y-%m-%dT%H:%M:%S")]
        names = ", ".join(f'"{c}"' for c in ("key", *STORED_COLUMNS, "finished_at"))
        marks = ", ".join("?" * len(vals))
        with self.con:
            self.con.execute("DELETE FROM runs WHERE key = ? AND status = 'error'", (key,))
            cur = self.con.execute(f"INSERT OR IGNORE INTO runs ({names}) VALUES ({marks})",
                                   vals)
            if cur.rowcount == 1:
                self.con.execute("DELETE FROM plans WHERE key = ?", (key,))
                if plan is not None:
                    self.con.execute("INSERT INTO plans VALUES (?, ?)", (key, plan))
        return cur.rowcount == 1

    def plans(self, keys: Iterable[str] | None = None) -> dict[str, str]:
        """The stored plans (all, or those of the given keys): run key -> the plan file
        document as JSON text (:func:`slackopt.io.plan_from_dict` reads it back). Runs
        without a plan, and runs stored by a slackopt that kept no plans, are absent."""
        want = None if keys is None else set(keys)
        return {k: p for k, p in self.con.execute("SELECT key, plan FROM plans")
                if want is None or k in want}

    def rows(self, keys: Iterable[str] | None = None, *, retry_errors: bool = False
             ) -> pd.DataFrame:
        """Stored runs (all, or those with the given keys) with a ``key`` column; with
        `retry_errors`, without the ``"error"`` rows (those a rerun does again)."""
        import pandas as pd

        df = pd.read_sql_query("SELECT * FROM runs", self.con)
        if keys is not None:
            df = df[df["key"].isin(set(keys))]
        if retry_errors:
            df = df[df["status"] != "error"]
        return df

    def close(self) -> None:
        """Close the database connection."""
        self.con.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _sql_value(v: Any) -> Any:
    import pandas as pd

    if v is None or v is pd.NA:
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    return v
