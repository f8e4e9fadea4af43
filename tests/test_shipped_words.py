"""Shipped files speak of the project only: no absolute path of the machine that wrote
them (a store under someone's work or temporary folder, a home folder) and no talk of
the tracker's issues ("the issue's tolerance", "issue 22"). Shipped: every file of the
repository outside tests/ (the package, the solvers, instances with their references and
plans, docs, notebooks, benchmarks and their results), gzip files read decompressed."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(
    r"(?<![\w.~/:$])/(?:work|tmp|root|home|Users|mnt|var/folders)/\w[\w./-]*")
"""An absolute path under a machine's work, temporary or home folders (not a URL's path,
not ``~/...``, not ``$VAR/...``)."""
ISSUE_TALK = re.compile(r"(?i)\b(?:the|this|that|our) issue\b(?:'s)?|\bissues? ?[-#]?\d+")
"""The project's tracker spoken of: "the issue's", "issue 22", "issue-25", "issues 15/17"."""
CITED = ("Megatron-LM ", "nvbandwidth ")
"""Other projects' issues, cited as sources of a measured figure."""
BINARY = (".png", ".jpg", ".pdf", ".sqlite", ".pt", ".npz", ".parquet")


def shipped() -> list[Path]:
    res = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                         timeout=60)
    if res.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / f for f in res.stdout.decode().split("\0")
            if f and not f.startswith("tests/") and not f.endswith(BINARY)
            and (ROOT / f).is_file()]


def text_of(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


def offences(text: str) -> list[str]:
    out = [m.group(0) for m in MACHINE_PATH.finditer(text)]
    out += [m.group(0) for m in ISSUE_TALK.finditer(text)
            if not text[max(0, m.start() - 20):m.start()].endswith(CITED)]
    return out


def test_no_shipped_file_holds_a_machines_path_or_talk_of_issues() -> None:
    found = {str(p.relative_to(ROOT)): hits for p in shipped()
             if (hits := offences(text_of(p)))}
    assert not found, found


def test_what_the_check_finds() -> None:
    assert offences('"source": "store /work/lb/full.sqlite"') == ["/work/lb/full.sqlite"]
    assert offences("written to /tmp/x.json; kept in /home/u/a") == ["/tmp/x.json", "/home/u/a"]
    assert offences("The tolerance is the issue's where it gives one") == ["the issue's"]
    assert offences("(issue 22, item 6); case issue-25") == ["issue 22", "issue-25"]
    assert offences("https://x.org/tmp/a, ~/work/b, $TMPDIR/tmp/c, --out repro") == []
    assert offences("Megatron-LM issue 6491; nvbandwidth issue 24") == []
    assert offences('prefetch="at_issue" when a layer issues it') == []
