"""`slackopt reproduce` writes its report, figures and tables (private tiny mode: the
scaled-down workloads keep this test short; the real run is `slackopt reproduce --quick`)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from slackopt.cli import main
from slackopt.reproduce import ABLATIONS, FIGURE4_SOLVERS, TINY_BUDGETS, Claim


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    return out


def test_reproduce_tiny_writes_everything(tiny_run, capsys):
    rc = main(["reproduce", "--tiny", "--out", str(tiny_run), "--workers", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    names = {p.rsplit("/", 1)[-1] for p in doc["files"]}
    assert names == {"report.md", "figure4.png", "figure5.png", "figure4.csv", "table2.csv",
                     "table3.csv", "vgg16_titanx.csv"}
    for n in names:
        assert (tiny_run / n).stat().st_size > 0, n
    for n in ("figure4.png", "figure5.png"):
        assert (tiny_run / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig4 = pd.read_csv(tiny_run / "figure4.csv")
    assert set(fig4["solver"]) == set(FIGURE4_SOLVERS)
    assert sorted(set(fig4["budget_fraction"].round(6)), reverse=True) == list(TINY_BUDGETS)
    assert fig4["instance"].nunique() == 4
    t3 = pd.read_csv(tiny_run / "table3.csv")
    assert set(ABLATIONS) <= set(t3["solver"])
    t2 = pd.read_csv(tiny_run / "table2.csv")
    assert {"step", "recompute", "stall_fwd", "stall_bwd", "copied_out_GB"} <= set(t2.columns)
    report = (tiny_run / "report.md").read_text()
    for heading in ("## Summary", "## Figure 4", "## Table 2", "## Figure 5", "## Table 3",
                    "## Section 4.1 check", "## Where the reproduction differs",
                    "## Modelling choices"):
        assert heading in report, heading
    assert "TEST MODE" in report and "n/a - the genetic search is skipped" in report
    # Every claim carries the paper's value; the VGG check is computed in every mode.
    keys = {c["key"]: c for c in doc["claims"]}
    assert keys["vgg.titanx.conv"]["paper"] == [3.4, 3.4]
    assert keys["vgg.titanx.conv"]["ours"] is not None
    assert 0 <= doc["reproduced"] <= doc["compared"] <= len(doc["claims"])


def test_claim_difference_is_the_distance_to_the_paper_range():
    c = Claim("k", "s", "w", (80.0, 82.0), 75.7, "%", 3.0)
    assert c.diff == pytest.approx(-4.3) and c.ok is False
    assert Claim("k", "s", "w", (80.0, 82.0), 81.0, "%", 3.0).diff == 0.0
    assert Claim("k", "s", "w", (36.0, 36.0), 40.0, "%", 6.0).ok is True
    assert Claim("k", "s", "w", (36.0, 36.0), float("nan"), "%", 6.0).ok is None


def test_reproduce_refuses_to_replace_a_report(tmp_path, capsys):
    from slackopt.cli import main

    (tmp_path / "report.md").write_text("mine")
    rc = main(["reproduce", "--tiny", "--out", str(tmp_path), "--workers", "1"])
    assert rc == 2 and (tmp_path / "report.md").read_text() == "mine"
    assert "--force" in capsys.readouterr().err
