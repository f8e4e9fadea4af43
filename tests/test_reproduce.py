"""`slackopt reproduce` writes its report, figures and tables (private tiny mode: the
scaled-down workloads keep this test short; the real run is `slackopt reproduce --quick`)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from slackopt.cli import main
from slackopt.experiments.reproduce import ABLATIONS, FIGURE4_SOLVERS, TINY_BUDGETS, Claim


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    return out


@pytest.mark.slow
def test_reproduce_tiny_writes_everything(tiny_run, capsys):
    rc = main(["reproduce", "--tiny", "--out", str(tiny_run), "--workers", "1", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    names = {p.rsplit("/", 1)[-1] for p in doc["files"]}
    assert names == {"report.md", "figure4.png", "figure5.png", "figure6a.png", "figure6b.png",
                     "gpu_generations.png", "figure4.csv", "table2.csv", "table3.csv",
                     "vgg16_titanx.csv", "figure6a.csv", "figure6b.csv", "gpu_generations.csv"}
    for n in names:
        assert (tiny_run / n).stat().st_size > 0, n
    for n in ("figure4.png", "figure5.png", "figure6a.png", "figure6b.png",
              "gpu_generations.png"):
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
                    "### Figure 6a", "### Figure 6b", "### GPU generations",
                    "## Modelling choices"):
        assert heading in report, heading
    assert "TEST MODE" in report and "n/a - the genetic search is skipped" in report
    # Every claim carries the paper's value; the VGG check is computed in every mode.
    keys = {c["key"]: c for c in doc["claims"]}
    assert keys["vgg.titanx.conv"]["paper"] == [3.4, 3.4]
    assert keys["vgg.titanx.conv"]["ours"] is not None
    assert 0 <= doc["reproduced"] <= doc["compared"] <= len(doc["claims"])
    # Section 4.5: the link sweep has every baseline and SlackSwap's bytes at both links.
    f6a = pd.read_csv(tiny_run / "figure6a.csv")
    assert sorted(set(f6a["link_gbps"])) == [12, 450]
    assert set(f6a["solver"]) == {"vdnn", "superneurons", "swapadvisor", "checkpoint",
                                  "slackswap"}
    ss = f6a[f6a["solver"] == "slackswap"]
    assert ss["swapped_bytes"].notna().all() and ss["recomputed_bytes"].notna().all()
    assert f6a[f6a["solver"] != "slackswap"]["swapped_bytes"].isna().all()
    f6b = pd.read_csv(tiny_run / "figure6b.csv")
    assert list(f6b.groupby("seq")["batch"].first()) == [8, 1]  # 16K tokens, >= 1 sequence
    # f grows with the sequence (attention FLOPs per saved byte grow).
    f = f6b.groupby("seq")["hideable_fraction"].first()
    assert f[32768] > f[2048]
    gen = pd.read_csv(tiny_run / "gpu_generations.csv")
    assert set(zip(gen["workload"], gen["gpu"], strict=True)) == {
        (w, g) for w in ("gpt2-xl", "llama-7b") for g in ("v100", "a100", "h100")}
    assert {"fig6a.lead@12", "fig6b.f@2048", "gen.gpt2-xl@v100"} <= set(keys)


def test_paper_numbers_file_is_complete_and_well_formed():
    """Every claim in slackopt/data/paper_numbers.toml has the fields the report needs, a
    known unit and [lo, hi] with lo <= hi; a computed value without an entry is refused."""
    from slackopt.experiments.reproduce import _claims, paper_numbers

    paper = paper_numbers()
    assert len(paper) == 123  # 95 of sections 1-4.4 and 28 of section 4.5
    for key, e in paper.items():
        assert {"where", "what", "paper", "unit", "tol"} <= set(e), key
        assert e["unit"] in {"%", "x", "GB", "ms", "pt", "steps", "bool", "GB/s"}, key
        lo, hi = e["paper"]
        assert lo <= hi and e["tol"] >= 0, key
    assert paper["fig6a.swapped@200"]["paper"] == [16.7, 16.7]
    assert paper["gen.llama-7b@a100"]["paper"] == [1.16, 1.16]
    cl = _claims({"gen.llama-7b@a100": 1.17}, {"gen.llama-7b@a100": {"best": "checkpoint"}})
    assert [c.key for c in cl] == ["gen.llama-7b@a100"]
    assert cl[0].what == "Llama-7B on the A100: SlackSwap / best baseline (checkpoint)"
    assert cl[0].diff == pytest.approx(0.01) and cl[0].ok
    with pytest.raises(KeyError, match="no claim nonsense"):
        _claims({"nonsense": 1.0}, {})


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


@pytest.mark.parametrize("arrives_as", ["KeyboardInterrupt", "SystemError"])
def test_an_interrupted_reproduce_says_which_files_it_kept(tmp_path, capsys, monkeypatch,
                                                           arrives_as):
    """Ctrl-C after some files are written: exit 130 and one line naming exactly the files
    this run wrote (not a file that was there before and left alone), never "nothing was
    kept"; Ctrl-C inside compiled code arrives wrapped in a SystemError."""
    import os

    import slackopt.experiments.reproduce as rep
    from slackopt.cli import main

    (tmp_path / "notes.txt").write_text("mine")
    old = tmp_path / "table2.csv"
    old.write_text("old")
    os.utime(old, ns=(1, 1))

    def fake(out, **kw):
        (out / "figure4.csv").write_text("a")
        (out / "figure4.png").write_bytes(b"b")
        old.write_text("new")
        if arrives_as == "KeyboardInterrupt":
            raise KeyboardInterrupt
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("error return without exception set") from e

    monkeypatch.setattr(rep, "reproduce", fake)
    rc = main(["reproduce", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 130
    assert err.splitlines() == [
        f"slackopt: interrupted; kept figure4.csv, figure4.png, table2.csv in {tmp_path}, "
        "written before Ctrl-C (this run wrote no report.md); run the same command again "
        "to make them all"], err
