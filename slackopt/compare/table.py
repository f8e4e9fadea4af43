"""The tidy results table of :func:`slackopt.compare.compare`: its columns and dtypes
(:data:`SCHEMA`), and :func:`coerce`, which gives any table read back from a file those
dtypes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Column -> dtype of the tidy table, in order. "Int64"/"boolean" are pandas' nullable types.
SCHEMA: dict[str, str] = {
    # instance descriptors
    "instance": "object",            # instance name
    "instance_hash": "object",       # sha256 of the instance's canonical JSON, 16 hex digits
    "A_bytes": "Int64",              # saved bytes A
    "P_bytes": "Int64",              # keep-all peak P
    "ideal_time_s": "float64",       # T*
    "forward_time_s": "float64",     # T_F
    "hideable_fraction": "float64",  # f = min(1, W T_F / A)
    # the run
    "budget_fraction": "float64",    # M / P (the requested fraction when given as one)
    "budget_bytes": "Int64",         # M
    "solver": "object",
    "params": "object",              # the solver's hyperparameters, canonical JSON text
    "seed": "Int64",                 # <NA> for no seed
    "time_limit_s": "float64",       # NaN for none
    "status": "object",              # optimal, bounded, feasible, infeasible, timeout, error
    "message": "object",             # error / timeout text, or the evaluator's failure
    # the Evaluation of the returned plan: an infeasible plan has no step time (NaN) and
    # throughput 0; both are NaN for a run without a plan (error, timeout)
    "policy": "object",              # the plan's runtime policy (Plan.policy); None for a
                                     # run without a plan and for rows of a store written
                                     # before this column (schema version 1)
    "feasible": "bool",
    "step_time_s": "float64",
    "throughput": "float64",
    "stall_fwd_s": "float64",
    "stall_bwd_s": "float64",
    "recompute_s": "float64",
    "d2h_bytes": "Int64",
    "h2d_bytes": "Int64",
    "evictions": "Int64",
    "peak_bytes": "Int64",
    # the solver's own report
    "planning_time_s": "float64",
    "objective_s": "float64",
    "lower_bound_s": "float64",
    "bound_source": "object",        # where lower_bound_s comes from (gaps.BOUND_SOURCES):
                                     # "T* (trivial)", "certified" (a solver that certifies
                                     # its bounds: milp), "solver-reported"; None for none
    "min_budget_bytes": "Int64",
    "n_keep": "Int64",
    "n_swap": "Int64",
    "n_recomp": "Int64",
    # gaps (computed over the table and the references)
    "best_lower_bound_s": "float64",
    "best_bound_source": "object",   # where best_lower_bound_s comes from: a bound_source
                                     # value, or "reference" (the references file)
    "gap_to_bound": "float64",
    "best_step_s": "float64",
    "gap_to_best": "float64",
}
COLUMNS: tuple[str, ...] = tuple(SCHEMA)
"""The columns of :func:`compare`'s DataFrame, in order."""
GAP_COLUMNS = ("best_lower_bound_s", "best_bound_source", "gap_to_bound", "best_step_s",
               "gap_to_best")
STORED_COLUMNS = tuple(c for c in COLUMNS if c not in GAP_COLUMNS)
"""The columns a :class:`~slackopt.compare.store.ResultStore` keeps (gaps are recomputed)."""


def coerce(df: pd.DataFrame) -> pd.DataFrame:
    """Give a results table the column order and dtypes of :data:`SCHEMA`.

    Missing columns are added empty; extra columns are kept after the known ones. Used on
    tables read back from CSV, JSON, Parquet or SQLite.
    """
    import pandas as pd

    df = df.copy()
    for c, dt in SCHEMA.items():
        if c not in df.columns:
            df[c] = pd.NA if dt != "float64" else math.nan
        col = df[c]
        if dt == "Int64":
            df[c] = pd.to_numeric(col, errors="coerce").round().astype("Int64")
        elif dt == "float64":
            df[c] = pd.to_numeric(col, errors="coerce").astype("float64")
        elif dt == "bool":
            df[c] = col.map(_to_bool).astype(bool)
        else:
            df[c] = col.astype(object).where(col.notna(), None)
    df["message"] = df["message"].map(lambda x: "" if x is None else str(x))
    extra = [c for c in df.columns if c not in SCHEMA]
    return df[list(COLUMNS) + extra].reset_index(drop=True)


def _to_bool(x: Any) -> bool:
    import pandas as pd

    if isinstance(x, str):
        return x.strip().lower() in ("true", "1", "yes")
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return False
    return bool(x)
