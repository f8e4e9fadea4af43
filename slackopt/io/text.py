"""The JSON text layer of instance and plan files: reading (gzip recognised by its magic
bytes), parsing with NaN tokens and repeated keys kept visible, normalising to plain JSON,
deterministic writing and atomic, no-clobber replacement of files.

Every problem is a :class:`~slackopt.errors.FileFormatError` naming the file and the
field, or an :class:`OutputExistsError` for a file that exists.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import uuid
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slackopt.errors import FileFormatError, SlackoptError, json_problem

PathLike = str | os.PathLike[str]


class OutputExistsError(SlackoptError, FileExistsError):
    """Refused to replace an existing file (pass ``overwrite=True`` / ``--force``)."""


class _NonFinite:
    """Stands for a NaN / Infinity token while the document is checked."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token

    def __repr__(self) -> str:
        return self.token


class _DupKeys(dict):
    """A JSON object that repeated some keys (the last value wins in plain json)."""

    dups: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
    out: dict[str, Any] = {}
    dups: list[str] = []
    for k, v in pairs:
        if k in out:
            dups.append(k)
        out[k] = v
    if dups:
        d = _DupKeys(out)
        d.dups = dups
        return d
    return out


def fmt_loc(loc: Sequence[str | int]) -> str:
    """('tensors', 12, 'size_bytes') -> 'tensors[12].size_bytes'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


MAX_NESTING = 64
"""Deepest nesting of lists and objects a file may have (slackopt writes at most 4 levels;
``meta`` may hold more). Deeper documents are refused before anything recurses on them."""


def _check_unicode(text: str, path: str, loc: tuple[str | int, ...]) -> None:
    """Refuse a string JSON decoded from a lone surrogate escape (not valid Unicode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise FileFormatError(path, fmt_loc(loc), f"string holds {text[e.start]!a}, a lone "
                              "UTF-16 surrogate that is not a character",
                              "write valid Unicode text (escape pairs like \\ud83d\\ude00 "
                              "together, or the character itself)") from None


def normalize(obj: Any, path: str, loc: tuple[str | int, ...] = ()) -> Any:
    """A plain-JSON copy of `obj` (dict/list/str/int/float/bool/None).

    Tuples become lists and numpy scalars Python numbers. Refuses NaN and infinities
    (NaN/Infinity tokens included), repeated keys, non-string keys, strings that are not
    valid Unicode (lone surrogates such as ``"\\ud800"``, which cannot be written back as
    UTF-8), nesting deeper than :data:`MAX_NESTING` and other types, with a
    FileFormatError naming the field.
    """
    if len(loc) > MAX_NESTING:
        raise FileFormatError(path, fmt_loc(loc[:MAX_NESTING]),
                              f"nested more than {MAX_NESTING} levels deep",
                              "keep lists and objects shallow (slackopt writes at most 4 "
                              "levels)")
    if isinstance(obj, str):
        _check_unicode(obj, path, loc)
        return obj
    if isinstance(obj, _NonFinite) or (isinstance(obj, float) and not math.isfinite(obj)):
        tok = obj.token if isinstance(obj, _NonFinite) else repr(obj)
        raise FileFormatError(
            path, fmt_loc(loc),
            f"non-finite number {tok}: JSON has no NaN or Infinity",
            "write a finite number (sizes in bytes, times in seconds)")
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return normalize(float(obj), path, loc)
    if isinstance(obj, Mapping):
        dups = getattr(obj, "dups", None)
        if dups:
            raise FileFormatError(
                path, fmt_loc((*loc, dups[0])), f"key '{dups[0]}' appears more than once "
                "in the same object", "keep one entry per key")
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise FileFormatError(path, fmt_loc(loc), f"key {k!r} is not a string",
                                      "use string keys only")
            _check_unicode(k, path, loc)
            out[k] = normalize(v, path, (*loc, k))
        return out
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [normalize(v, path, (*loc, i)) for i, v in enumerate(obj)]
    raise FileFormatError(path, fmt_loc(loc), f"value of type {type(obj).__name__} cannot be "
                          "stored in JSON", "use numbers, strings, booleans, null, lists and dicts")


GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip file (RFC 1952, section 2.3.1)."""


def read_bytes(path: PathLike) -> bytes:
    """The file's bytes, decompressed if it is gzip (the gzip magic bytes, whatever the
    name), or a FileFormatError naming what is wrong with the path or the compression."""
    p = Path(path)
    data = _read_raw(p)
    if data[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
            raise FileFormatError(p, "", f"not a valid gzip file ({e})",
                                  "give an intact .json.gz (or plain .json) written by "
                                  "slackopt") from None
    if p.suffix.lower() == ".gz" and data:
        raise FileFormatError(p, "", "named .gz but not gzip-compressed (no gzip header)",
                              "compress it with gzip, or drop the .gz from its name")
    return data


def _read_raw(p: Path) -> bytes:
    """The file's bytes as stored, or a FileFormatError naming what is wrong with the
    path."""
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise FileFormatError(p, "", "file not found", "check the path") from None
    except IsADirectoryError:
        raise FileFormatError(p, "", "is a directory, not a file", "give the path of a file") \
            from None
    except PermissionError:
        raise FileFormatError(p, "", "permission denied", "make the file readable") from None
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be read ({e.strerror or e})", "check the path") \
            from None


def read_json(path: PathLike) -> Any:
    """The JSON document of file `path` (gzip or plain), parsed with NaN / Infinity tokens
    and repeated keys kept visible for :func:`normalize` to refuse.

    Raises:
        FileFormatError: the file cannot be read, is not UTF-8, is empty or is not JSON.
    """
    p = Path(path)
    try:
        text = read_bytes(p).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FileFormatError(p, "", f"not UTF-8 text (byte {e.start})",
                              "give a JSON file written by slackopt") from None
    if not text.strip():
        raise FileFormatError(p, "", "file is empty", "give a JSON file written by slackopt")
    try:
        return json.loads(text, parse_constant=_NonFinite, object_pairs_hook=_pairs_hook)
    except json.JSONDecodeError as e:
        raise FileFormatError(p, "", json_problem(e), "give a JSON file written by slackopt "
                              "(instance and plan files are JSON, never pickles)") from None
    except RecursionError:
        raise FileFormatError(p, "", "JSON nested too deeply",
                              "give a file written by slackopt") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise FileFormatError(p, "", json_problem(e),
                              "write numbers with at most a few dozen digits") from None


def dumps(doc: Mapping[str, Any]) -> str:
    """Deterministic JSON text: one top-level key per line, one list item or dict entry
    per line below it, everything else compact."""
    def c(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    lines = ["{"]
    items = list(doc.items())
    for n, (k, v) in enumerate(items):
        end = "," if n < len(items) - 1 else ""
        if isinstance(v, list) and v:
            lines.append(f"{c(k)}:[")
            lines.extend(f"{c(x)}{',' if i < len(v) - 1 else ''}" for i, x in enumerate(v))
            lines.append(f"]{end}")
        elif isinstance(v, dict) and len(v) > 1 and k != "link":
            lines.append(f"{c(k)}:{{")
            lines.extend(f"{c(kk)}:{c(vv)}{',' if i < len(v) - 1 else ''}"
                         for i, (kk, vv) in enumerate(v.items()))
            lines.append(f"}}{end}")
        else:
            lines.append(f"{c(k)}:{c(v)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_text(path: PathLike, text: str, overwrite: bool) -> Path:
    """Write `text` to `path` atomically; refuse to replace a file unless `overwrite`.

    A path ending in ``.gz`` gets the UTF-8 text gzip-compressed, deterministically: no
    file name and a zero modification time in the header (``gzip.compress(mtime=0)``), so
    the same text gives the same bytes."""
    p = Path(path)
    data = text.encode("utf-8")
    if p.suffix.lower() == ".gz":
        data = gzip.compress(data, compresslevel=9, mtime=0)
    if p.is_dir():
        raise FileFormatError(p, "", "is a directory", "give a file path to write to")
    if not overwrite and p.exists():
        raise OutputExistsError(f"{p}: file exists; pass --force (overwrite=True) to replace "
                                "it, or choose another path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.parent / f".{p.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if overwrite:
                os.replace(tmp, p)
            else:
                try:  # no-clobber rename: link fails if the target appeared meanwhile
                    os.link(tmp, p)
                except FileExistsError:
                    raise OutputExistsError(
                        f"{p}: file exists; pass --force (overwrite=True) to replace it, or "
                        "choose another path") from None
                except OSError:  # file system without hard links
                    if p.exists():
                        raise OutputExistsError(
                            f"{p}: file exists; pass --force (overwrite=True) to replace it, "
                            "or choose another path") from None
                    os.replace(tmp, p)
        finally:
            if tmp.exists():
                tmp.unlink()
    except SlackoptError:
        raise
    except OSError as e:
        raise FileFormatError(p, "", f"cannot be written ({e.strerror or e})",
                              "check that the directory exists and is writable") from None
    return p
