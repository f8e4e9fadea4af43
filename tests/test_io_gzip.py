"""gzip-compressed instance files (``.json.gz``): one load path, deterministic writes, and
the same clear errors as plain files (slackopt.io)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from slackopt import io
from slackopt.errors import FileFormatError
from tests.helpers import assert_user_error, run
from tests.test_cli import MAKE_SMALL

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "instances" / "paper" / "bert-large_a100-pcie4.json"


def test_shipped_instance_round_trips_through_gzip(tmp_path: Path) -> None:
    plain = io.load_instance(SHIPPED)
    gz = io.save_instance(plain, tmp_path / "bert.json.gz")
    raw = gz.read_bytes()
    assert raw[:2] == io.GZIP_MAGIC
    # the compressed text is exactly what a plain save writes, and the header holds no
    # time or name: saving again gives the same bytes
    assert gzip.decompress(raw) == io.save_instance(plain, tmp_path / "bert.json").read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # MTIME (RFC 1952)
    assert io.save_instance(plain, tmp_path / "again.json.gz").read_bytes() == raw
    back = io.load_instance(gz)
    assert io.instance_to_dict(back) == io.instance_to_dict(plain)
    assert back.summary() == plain.summary()
    # recognised by its magic bytes, whatever the name
    renamed = tmp_path / "bert-compressed.json"
    renamed.write_bytes(raw)
    assert io.instance_to_dict(io.load_instance(renamed)) == io.instance_to_dict(plain)


def test_bad_gzip_files_name_the_file(tmp_path: Path) -> None:
    raw = io.save_instance(io.load_instance(SHIPPED), tmp_path / "ok.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FileFormatError, match=r"cut\.json\.gz: not a valid gzip file"):
        io.load_instance(cut)
    plain = tmp_path / "plain.json.gz"
    plain.write_bytes(SHIPPED.read_bytes())
    with pytest.raises(FileFormatError, match=r"plain\.json\.gz: named \.gz but not gzip"):
        io.load_instance(plain)
    # a problem inside the compressed JSON is reported as for a plain file
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(SHIPPED.read_bytes().replace(b'"schema_version":1',
                                                               b'"schema_version":7')))
    with pytest.raises(FileFormatError, match=r"bad\.json\.gz: field 'schema_version'"):
        io.load_instance(bad)


def test_cli_reads_and_writes_gzip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "g.json.gz"
    rc, _, err = run(capsys, "make", "gpt2-xl", *MAKE_SMALL, "-o", out)
    assert rc == 0, err
    assert out.read_bytes()[:2] == io.GZIP_MAGIC
    rc, text, err = run(capsys, "describe", out, "--json")
    assert rc == 0, err
    assert io.load_instance(out).name in text
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(out.read_bytes()[:40])
    for cmd in (["describe", cut], ["solve", cut, "-s", "slackswap", "-b", "0.5"]):
        assert_user_error(*run(capsys, *cmd), str(cut), "not a valid gzip file", "Fix:")
