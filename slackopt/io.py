"""Instance and plan files: versioned JSON, validated on load, written atomically.

Two file formats, both JSON objects that start with ``"format"`` and ``"schema_version"``:

- **instance files** (``"format": "slackopt-instance"``)::

      {"format": "slackopt-instance", "schema_version": 1, "name": "gpt2-small",
       "meta": {"generator": "transformer", "params": {...}},
       "link": {"name": "pcie4", "bytes_per_s": 25e9, "duplex_factor": 0.85,
                "copy_latency_s": 1e-05},
       "ops": [{"name", "phase", "duration_s", "layer", "kind", "workspace_bytes",
                "flops", "never_recompute", "random"}, ...],
       "tensors": [{"name", "size_bytes", "producer", "readers", "category",
                    "recipe": null | {"ops", "inputs", "transient_bytes"},
                    "storage", "mutated_by"}, ...]}

  A link with different bandwidths per direction holds ``"d2h_bytes_per_s"`` and
  ``"h2d_bytes_per_s"`` instead of ``"bytes_per_s"``; a symmetric link is written with
  ``"bytes_per_s"`` alone (what readers before per-direction links read), and a file may
  give both styles only if they agree.

  Optional instance-level fields (written only when they differ from the default):
  ``"rng_capture": false`` (RNG state cannot be saved: no recipe may run a random op) and
  ``"host_memory_bytes": N`` (host pinned-memory limit for swapped storages, bytes;
  absent or null = unlimited) and ``"units": [{"kind", "n_ops", "microbatch", "chunk",
  "earliest_start_s"}, ...]`` (the units of a pipeline stage's schedule, spanning the
  ops in order; absent = one forward and one backward pass). Optional tensor fields
  (written only when set): ``"storage": "base"`` (the tensor is a view of tensor
  ``base``'s storage) and ``"mutated_by": [op, ...]`` (forward ops that overwrite it
  in place). Their meaning: :mod:`slackopt.instance` ("Extensions").

  Fields mean what the attributes of :class:`~slackopt.instance.Op`,
  :class:`~slackopt.instance.Tensor`, :class:`~slackopt.instance.Recipe` and
  :class:`~slackopt.hardware.Link` mean (bytes are integers, times float seconds).
  Optional fields take the dataclass defaults.

- **plan files** (``"format": "slackopt-plan"``)::

      {"format": "slackopt-plan", "schema_version": 1, "instance": "gpt2-small",
       "policy": "barrier_free", "decisions": {"tensor name": "keep" | "swap" | "recomp"},
       "meta": {...}}

  ``runtime_params`` (optional, ``{}`` by default) holds the runtime policy's parameters
  (:data:`slackopt.plan.RUNTIME_PARAMS`, e.g. ``{"eviction": "belady"}``).

  ``decisions`` names every saved tensor of the instance once; ``meta`` (optional) records
  provenance (solver, budget, ...) and is never interpreted. Saved views of one storage
  (``"storage"``) each have their own entry and must all get the same decision; a plan
  that splits a storage is refused naming both views.

Files are JSON only (never pickle or eval). Loading checks the structure with pydantic
models (missing and unknown fields, wrong types, NaN/Infinity are refused), then the
meaning (sizes, durations, references, ...) once, through
:class:`~slackopt.instance.Instance` and :class:`~slackopt.plan.Plan`;
every failure is a :class:`~slackopt.errors.FileFormatError` that names the file, the
field (``tensors[12].size_bytes``) and a fix (for a problem of meaning, the field and fix
that the :class:`~slackopt.errors.InstanceError` carries). Writing is deterministic
(stable key order, one op / tensor / decision per line, floats written so they read back
bit for bit) and atomic (a temporary file renamed into place); an existing file is never
replaced unless ``overwrite=True``.

Either file may be gzip-compressed: a path ending in ``.gz`` is written compressed (no
file name and a zero time in the header, so the bytes stay deterministic), and a file
that starts with the gzip magic bytes is decompressed before it is read, whatever its
name; the rest of the load path, and its messages, are those of a plain file.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import gzip
import json
import math
import operator
import os
import re
import types
import typing
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, NotRequired

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator
from pydantic_core import core_schema as cs
from typing_extensions import TypedDict, is_typeddict

from slackopt.errors import (
    FileFormatError,
    InstanceError,
    PlanError,
    SlackoptError,
    json_problem,
)
from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor, UnitSpan
from slackopt.plan import DECISION_NAMES, POLICIES, Plan, check_runtime_params

INSTANCE_FORMAT = "slackopt-instance"
PLAN_FORMAT = "slackopt-plan"
INSTANCE_SCHEMA_VERSIONS = (1,)
"""Instance-file schema versions this slackopt reads; it writes the last one."""
PLAN_SCHEMA_VERSIONS = (1,)
"""Plan-file schema versions this slackopt reads; it writes the last one."""

PathLike = str | os.PathLike[str]


class OutputExistsError(SlackoptError, FileExistsError):
    """Refused to replace an existing file (pass ``overwrite=True`` / ``--force``)."""


# ----------------------------------------------------------------------------- schemas
class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


# Instance files are validated as TypedDicts (plain dicts out, no model objects: a file
# of 150k layers has about a million fields), with the same strict rules as the models.
# The schema checks structure only: the fields present, none unknown, each of its JSON
# type (whole numbers for bytes, strings for names); what the values mean (sizes >= 0,
# names that resolve, bandwidths > 0) is checked once, by Instance. Absent optional
# fields stay absent; the defaults are those of Op, Tensor, Recipe and Link. Lists fail
# fast: the first op or tensor of the wrong structure ends the validation.
_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


class LinkModel(TypedDict):
    """``link``: the host link: ``bytes_per_s`` (both directions), or
    ``d2h_bytes_per_s`` and ``h2d_bytes_per_s`` (:class:`~slackopt.hardware.Link` checks
    that one of the two styles is given, consistently)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    bytes_per_s: NotRequired[float]
    d2h_bytes_per_s: NotRequired[float]
    h2d_bytes_per_s: NotRequired[float]
    duplex_factor: NotRequired[float]
    copy_latency_s: NotRequired[float]


class OpModel(TypedDict):
    """``ops[i]``: one operator."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    phase: str
    duration_s: float
    layer: NotRequired[int]
    kind: NotRequired[str]
    workspace_bytes: NotRequired[int]
    flops: NotRequired[float]
    never_recompute: NotRequired[bool]
    random: NotRequired[bool]


class RecipeModel(TypedDict):
    """``tensors[j].recipe``: how to rebuild a dropped tensor."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    ops: list[str]
    inputs: NotRequired[list[str]]
    transient_bytes: NotRequired[int]


class TensorModel(TypedDict):
    """``tensors[j]``: one tensor."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    name: str
    size_bytes: int
    producer: str
    readers: NotRequired[list[str]]
    recipe: NotRequired[RecipeModel | None]
    category: NotRequired[str]
    storage: NotRequired[str | None]
    mutated_by: NotRequired[list[str]]


class UnitModel(TypedDict):
    """``units[i]``: one unit of a pipeline stage's schedule."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    kind: str
    n_ops: int
    microbatch: NotRequired[int]
    chunk: NotRequired[int]
    earliest_start_s: NotRequired[float]


class InstanceFileModel(TypedDict):
    """An instance file (schema version 1)."""

    __pydantic_config__ = _STRICT  # type: ignore[misc]
    format: Literal["slackopt-instance"]
    # not Literal[1]: pydantic's JSON mode takes true and 1.0 for a literal 1
    schema_version: Annotated[int, Strict(), Field(ge=1, le=1)]
    name: str
    link: LinkModel
    rng_capture: NotRequired[bool]
    host_memory_bytes: NotRequired[int | None]
    units: NotRequired[list[UnitModel]]
    ops: Annotated[list[OpModel], Field(fail_fast=True)]
    tensors: Annotated[list[TensorModel], Field(fail_fast=True)]
    meta: NotRequired[dict[str, Any]]


_INSTANCE_SCHEMA = TypeAdapter(InstanceFileModel)


def _objects_schema(schema: dict[str, Any], cls: type, optional: Sequence[str] = ()) -> Any:
    """The core schema that validates what TypedDict `schema` validates but builds a `cls`
    (Op, Tensor, Recipe) in pydantic-core, with every field required except `optional`
    (which take `cls`'s defaults). Lists become tuples; the field checks are those of
    `schema`, so a type error reads the same on both."""
    fields = []
    for name in (f.name for f in dataclasses.fields(cls)):
        sub = _tuples(schema["fields"][name]["schema"])
        if name in optional:
            sub = cs.with_default_schema(sub, default=_DEFAULTS[cls][name])
        fields.append(cs.dataclass_field(name, sub))
    return cs.dataclass_schema(
        cls, cs.dataclass_args_schema(cls.__name__, fields, extra_behavior="forbid"),
        [f.name for f in dataclasses.fields(cls)], slots=True, frozen=True,
        config=schema["config"], strict=True)


def _tuples(schema: dict[str, Any]) -> Any:
    """`schema` with a list of names read as a tuple, a recipe built as a Recipe."""
    if schema["type"] == "list":
        return cs.tuple_schema([schema["items_schema"]], variadic_item_index=0, strict=True)
    if schema["type"] == "nullable" and schema["schema"].get("cls") is RecipeModel:
        return cs.nullable_schema(_objects_schema(schema["schema"], Recipe))
    return schema


_DEFAULTS = {c: {f.name: f.default for f in dataclasses.fields(c)} for c in (Op, Tensor, Recipe)}
_FAST_OPTIONAL = ("storage", "mutated_by")
"""The tensor fields that instance files hold only when set (:func:`instance_to_dict`);
all other op, tensor and recipe fields are required by the fast schema."""


def _fast_instance_schema() -> SchemaValidator:
    """Validator of instance files as :func:`save_instance` writes them (every op, tensor
    and recipe field present but ``storage`` and ``mutated_by``) that builds Op, Tensor and
    Recipe objects in pydantic-core: the top level is :class:`InstanceFileModel`'s, the
    items' checks are those of OpModel and TensorModel. A file it refuses for a missing
    field or its structure goes to the error path of :func:`load_instance`."""
    top = copy.deepcopy(_INSTANCE_SCHEMA.core_schema)
    for key, cls, optional in (("ops", Op, ()), ("tensors", Tensor, _FAST_OPTIONAL)):
        lst = top["fields"][key]["schema"]
        lst["items_schema"] = _objects_schema(lst["items_schema"], cls, optional)
    return SchemaValidator(top)


_FAST_SCHEMA = _fast_instance_schema()


class PlanFileModel(_Strict):
    """A plan file (schema version 1)."""

    format: Literal["slackopt-plan"]
    schema_version: Literal[1]
    instance: str | None = None
    policy: str = "barrier_free"
    runtime_params: dict[str, Any] = {}
    decisions: dict[str, Literal["keep", "swap", "recomp"]]
    meta: dict[str, Any] = {}


# ----------------------------------------------------------------------------- JSON text
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


def _fmt_loc(loc: Sequence[str | int]) -> str:
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
        raise FileFormatError(path, _fmt_loc(loc), f"string holds {text[e.start]!a}, a lone "
                              "UTF-16 surrogate that is not a character",
                              "write valid Unicode text (escape pairs like \\ud83d\\ude00 "
                              "together, or the character itself)") from None


def _normalize(obj: Any, path: str, loc: tuple[str | int, ...] = ()) -> Any:
    """A plain-JSON copy of `obj` (dict/list/str/int/float/bool/None).

    Tuples become lists and numpy scalars Python numbers. Refuses NaN and infinities
    (NaN/Infinity tokens included), repeated keys, non-string keys, strings that are not
    valid Unicode (lone surrogates such as ``"\\ud800"``, which cannot be written back as
    UTF-8), nesting deeper than :data:`MAX_NESTING` and other types, with a
    FileFormatError naming the field.
    """
    if len(loc) > MAX_NESTING:
        raise FileFormatError(path, _fmt_loc(loc[:MAX_NESTING]),
                              f"nested more than {MAX_NESTING} levels deep",
                              "keep lists and objects shallow (slackopt writes at most 4 "
                              "levels)")
    if isinstance(obj, str):
        _check_unicode(obj, path, loc)
        return obj
    if isinstance(obj, _NonFinite) or (isinstance(obj, float) and not math.isfinite(obj)):
        tok = obj.token if isinstance(obj, _NonFinite) else repr(obj)
        raise FileFormatError(
            path, _fmt_loc(loc),
            f"non-finite number {tok}: JSON has no NaN or Infinity",
            "write a finite number (sizes in bytes, times in seconds)")
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int, float)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return _normalize(float(obj), path, loc)
    if isinstance(obj, Mapping):
        dups = getattr(obj, "dups", None)
        if dups:
            raise FileFormatError(
                path, _fmt_loc((*loc, dups[0])), f"key '{dups[0]}' appears more than once "
                "in the same object", "keep one entry per key")
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise FileFormatError(path, _fmt_loc(loc), f"key {k!r} is not a string",
                                      "use string keys only")
            _check_unicode(k, path, loc)
            out[k] = _normalize(v, path, (*loc, k))
        return out
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_normalize(v, path, (*loc, i)) for i, v in enumerate(obj)]
    raise FileFormatError(path, _fmt_loc(loc), f"value of type {type(obj).__name__} cannot be "
                          "stored in JSON", "use numbers, strings, booleans, null, lists and dicts")


GZIP_MAGIC = b"\x1f\x8b"
"""The first two bytes of a gzip file (RFC 1952, section 2.3.1)."""


def _read_bytes(path: PathLike) -> bytes:
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


def _read_json(path: PathLike) -> Any:
    p = Path(path)
    try:
        text = _read_bytes(p).decode("utf-8")
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


def _dumps(doc: Mapping[str, Any]) -> str:
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


def _write_text(path: PathLike, text: str, overwrite: bool) -> Path:
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


# ----------------------------------------------------------------------------- errors
_FIXES = {
    "missing": "add the field",
    "int_type": "write a whole number (bytes are integers, e.g. 1048576)",
    "int_from_float": "write a whole number (bytes are integers, e.g. 1048576)",
    "float_type": "write a number",
    "finite_number": "write a finite number",
    "string_type": "write a JSON string in double quotes",
    "bool_type": "write true or false",
    "list_type": "write a JSON list [...]",
    "dict_type": "write a JSON object {...}",
    "model_type": "write a JSON object {...}",
    "literal_error": "use one of the values listed",
    "greater_than_equal": "use a value >= 0",
    "less_than_equal": "use a smaller value",
}


def _fields(tp: Any) -> dict[str, Any] | None:
    """Field name -> type of a pydantic model or a TypedDict, else None."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return {k: f.annotation for k, f in tp.model_fields.items()}
    if is_typeddict(tp):
        return typing.get_type_hints(tp)
    return None


def _model_at(model: Any, loc: Sequence[str | int]) -> Any:
    """The model or TypedDict that validates the object at `loc` (for listing its fields)."""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(part, str):
            fields = _fields(tp)
            if fields is None or part not in fields:
                return None
            tp = fields[part]
        else:
            args = typing.get_args(tp)
            if typing.get_origin(tp) is not list or not args:
                return None
            tp = args[0]
    tp = _unwrap(tp)
    return tp if _fields(tp) is not None else None


def _unwrap(tp: Any) -> Any:
    """Strip Optional[...] / X | None."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return tp


def _item_label(raw: Any, loc: Sequence[str | int]) -> str:
    """" (tensor 'x')" for a loc inside ops[i] / tensors[j] when the raw item has a name."""
    if len(loc) >= 2 and loc[0] in ("ops", "tensors") and isinstance(loc[1], int) \
            and isinstance(raw, Mapping):
        items = raw.get(loc[0])
        if isinstance(items, list) and 0 <= loc[1] < len(items):
            it = items[loc[1]]
            if isinstance(it, Mapping) and isinstance(it.get("name"), str):
                return f"{'op' if loc[0] == 'ops' else 'tensor'} '{it['name']}': "
    return ""


def _pydantic_error(path: PathLike, err: ValidationError, raw: Any,
                    top: Any) -> FileFormatError:
    errs = err.errors(include_url=False)
    e = errs[0]
    loc = [p for p in e["loc"] if isinstance(p, (str, int))]
    # Unions report their branch in loc ("recipe", "RecipeModel", "ops"): drop model names.
    loc = [p for p in loc if not (isinstance(p, str) and p.endswith("Model"))]
    typ = e["type"]
    msg = e["msg"]
    if typ == "missing":
        problem = "required field is missing"
    elif typ == "extra_forbidden":
        problem = "unknown field"
    else:
        problem = msg[0].lower() + msg[1:]
        if "input" in e and typ not in ("model_type",):
            shown = json.dumps(e["input"], default=repr)
            problem += f", got {shown if len(shown) <= 60 else shown[:57] + '...'}"
    fix = _FIXES.get(typ, "correct the value")
    if typ == "extra_forbidden":
        parent = _model_at(top, loc[:-1])
        allowed = ", ".join(_fields(parent) or {}) if parent is not None else ""
        fix = "remove it" + (f" (allowed fields: {allowed})" if allowed else "")
    elif typ == "missing":
        fix = f"add '{loc[-1]}'" if loc else fix
    more = len(errs) - 1
    if more:
        problem += f" (and {more} more problem{'s' if more > 1 else ''})"
    return FileFormatError(path, _fmt_loc(loc), _item_label(raw, loc) + problem, fix)


_QUOTED = re.compile(r"'([^']*)'")


# ----------------------------------------------------------------------------- checks
def _check_header(path: PathLike, raw: Any, fmt: str, versions: tuple[int, ...]) -> None:
    what = "instance" if fmt == INSTANCE_FORMAT else "plan"
    make = ("slackopt make WORKLOAD -o FILE" if fmt == INSTANCE_FORMAT
            else "slackopt solve INSTANCE --solver NAME --budget B -o FILE")
    if not isinstance(raw, Mapping):
        raise FileFormatError(path, "", f"top level is a JSON {_json_kind(raw)}, not an object",
                              f"give a slackopt {what} file (written by `{make}`)")
    got = raw.get("format")
    if got is not None and not isinstance(got, str):
        raise FileFormatError(path, "format", f"a JSON {_json_kind(got)}, not a string",
                              f"write \"format\": \"{fmt}\" (a slackopt {what} file is written "
                              f"by `{make}`)")
    if got is None:
        raise FileFormatError(path, "format", f"missing: this is not a slackopt {what} file",
                              f"give a slackopt {what} file (written by `{make}`), whose first "
                              f"field is \"format\": \"{fmt}\"")
    if got != fmt:
        other = {INSTANCE_FORMAT: "an instance file", PLAN_FORMAT: "a plan file"}.get(got)
        problem = (f"this is {other}, not {'an' if what == 'instance' else 'a'} {what} file"
                   if other else f"'{got}' is not '{fmt}'")
        raise FileFormatError(path, "format", problem,
                              f"give a slackopt {what} file (written by `{make}`)")
    v = raw.get("schema_version")
    supported = ", ".join(map(str, versions))
    if v is None:
        raise FileFormatError(path, "schema_version", "missing",
                              f"add \"schema_version\": {versions[-1]} (supported: {supported})")
    if isinstance(v, bool) or not isinstance(v, int) or v not in versions:
        newer = isinstance(v, int) and not isinstance(v, bool) and v > versions[-1]
        fix = (f"upgrade slackopt, or rewrite the file with this version (`{make}`)" if newer
               else f"set \"schema_version\": {versions[-1]}, or rewrite the file (`{make}`)")
        raise FileFormatError(path, "schema_version", f"version {v!r} is not supported (this "
                              f"slackopt reads {what} files of schema version {supported})", fix)


def _json_kind(x: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(x), type(x).__name__)


# ----------------------------------------------------------------------------- instances
def instance_to_dict(instance: Instance) -> dict[str, Any]:
    """The JSON-ready document of an instance file (current schema version).

    Args:
        instance: the instance.

    Returns:
        A dict with plain Python values (ints for bytes, floats for times), in file order.

    Raises:
        FileFormatError: if ``instance.meta`` holds values JSON cannot store (NaN,
            infinities, objects); the field is named.
    """
    lk = instance.link
    doc = {
        "format": INSTANCE_FORMAT,
        "schema_version": INSTANCE_SCHEMA_VERSIONS[-1],
        "name": instance.name,
        "meta": _normalize(dict(instance.meta), "<instance meta>", ("meta",)),
        "link": {"name": str(lk.name), **_link_bandwidths(lk),
                 "duplex_factor": float(lk.duplex_factor),
                 "copy_latency_s": float(lk.copy_latency_s)},
        "ops": [{"name": op.name, "phase": op.phase, "duration_s": float(op.duration_s),
                 "layer": int(op.layer), "kind": op.kind,
                 "workspace_bytes": int(op.workspace_bytes), "flops": float(op.flops),
                 "never_recompute": bool(op.never_recompute), "random": bool(op.random)}
                for op in instance.ops],
        "tensors": [{"name": t.name, "size_bytes": int(t.size_bytes), "producer": t.producer,
                     "readers": list(t.readers), "category": t.category,
                     "recipe": None if t.recipe is None else {
                         "ops": list(t.recipe.ops), "inputs": list(t.recipe.inputs),
                         "transient_bytes": int(t.recipe.transient_bytes)},
                     **({} if t.storage is None else {"storage": t.storage}),
                     **({"mutated_by": list(t.mutated_by)} if t.mutated_by else {})}
                    for t in instance.tensors],
    }
    extra: dict[str, Any] = {}
    if not instance.rng_capture:
        extra["rng_capture"] = False
    if instance.host_memory_bytes is not None:
        extra["host_memory_bytes"] = int(instance.host_memory_bytes)
    if instance.scheduled_units is not None:
        extra["units"] = [{"kind": u.kind, "n_ops": int(u.n_ops), "microbatch": int(u.microbatch),
                           "chunk": int(u.chunk), "earliest_start_s": float(u.earliest_start_s)}
                          for u in instance.scheduled_units]
    if extra:  # after "link", before "ops"
        keys = list(doc)
        at = keys.index("ops")
        doc = {**{k: doc[k] for k in keys[:at]}, **extra, **{k: doc[k] for k in keys[at:]}}
    return doc


def _link_bandwidths(lk: Link) -> dict[str, float]:
    """The bandwidth fields of a link as files hold them: one ``bytes_per_s`` for a
    symmetric link (what readers before per-direction links read), else
    ``d2h_bytes_per_s`` and ``h2d_bytes_per_s``."""
    if lk.symmetric:
        return {"bytes_per_s": float(lk.d2h_bytes_per_s)}
    return {"d2h_bytes_per_s": float(lk.d2h_bytes_per_s),
            "h2d_bytes_per_s": float(lk.h2d_bytes_per_s)}


def instance_from_dict(d: Mapping[str, Any], source: str = "<dict>") -> Instance:
    """Validate an instance document and build the Instance.

    Args:
        d: the parsed document (as :func:`instance_to_dict` returns or a JSON file holds).
        source: what to call the document in error messages (the file path).

    Returns:
        The Instance.

    Raises:
        FileFormatError: naming `source`, the field (``tensors[3].producer``) and a fix,
            for a wrong format or schema version, a structural problem (missing, unknown
            or mistyped field, NaN, negative size) or a semantic one (dangling reference,
            duplicate name, reader before producer, ...).
    """
    _check_header(source, d, INSTANCE_FORMAT, INSTANCE_SCHEMA_VERSIONS)
    raw = _normalize(d, source)
    try:
        m = _INSTANCE_SCHEMA.validate_python(raw)
    except ValidationError as e:
        raise _pydantic_error(source, e, raw, InstanceFileModel) from None
    return _build_instance(m, source)


def _instance_of(m: Mapping[str, Any]) -> Instance:
    """Instance(...) of a validated document whose ops and tensors are built.

    Raises:
        InstanceError: as Instance and Link raise it; a bad bandwidth given as the
            document's ``bytes_per_s`` names that field, not the direction it fills.
    """
    try:
        return Instance(m["name"], m["ops"], m["tensors"], Link(**m["link"]),
                        meta=m.get("meta", {}),
                        **{k: m[k] for k in ("rng_capture", "host_memory_bytes") if k in m},
                        **({"units": [UnitSpan(**u) for u in m["units"]]} if "units" in m
                           else {}))
    except InstanceError as e:
        key = e.field.removeprefix("link.")
        if key in ("d2h_bytes_per_s", "h2d_bytes_per_s") and key not in m["link"] \
                and "bytes_per_s" in m["link"]:
            raise InstanceError(e.problem.replace(key, "bytes_per_s"), "link.bytes_per_s",
                                e.fix) from None
        raise


_OP_FIELDS = tuple(f.name for f in dataclasses.fields(Op))
_op_values = operator.itemgetter(*_OP_FIELDS)


def _op_from(o: Mapping[str, Any]) -> Op:
    # slackopt writes every field: then positional arguments, without keyword matching
    return Op(*_op_values(o)) if len(o) == len(_OP_FIELDS) else Op(**o)


def _build_instance(m: Mapping[str, Any], source: str) -> Instance:
    """The Instance of a validated document (defaults: those of Op, Tensor, Recipe, Link);
    an InstanceError becomes a FileFormatError with its field and fix."""
    built = {**m, "ops": [_op_from(o) for o in m["ops"]],
             "tensors": [_tensor_from(t) for t in m["tensors"]]}
    try:
        return _instance_of(built)
    except InstanceError as e:
        raise _file_error(source, e) from None


def _file_error(source: str, e: InstanceError) -> FileFormatError:
    """The FileFormatError of InstanceError `e` in file `source` (its field is a path
    into the file: the Instance's lists are the file's, in the file's order)."""
    return FileFormatError(source, e.field, e.problem,
                           e.fix or "correct the instance (or regenerate it with "
                           "`slackopt make`)")


_TENSOR_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Tensor)}
_RECIPE_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Recipe)}


_tensor_values = operator.itemgetter(*_TENSOR_DEFAULTS)
_recipe_values = operator.itemgetter(*_RECIPE_DEFAULTS)


def _tensor_from(t: Mapping[str, Any]) -> Tensor:
    # absent fields take the defaults (one dict merge, one lookup of all fields in C)
    name, size, producer, readers, rec, category, storage, mutated_by = _tensor_values(
        {**_TENSOR_DEFAULTS, **t})
    if rec is not None:
        ops, inputs, transient = _recipe_values({**_RECIPE_DEFAULTS, **rec})
        rec = Recipe(tuple(ops), tuple(inputs), transient)
    return Tensor(name, size, producer, tuple(readers), rec, category, storage,
                  tuple(mutated_by))


def save_instance(instance: Instance, path: PathLike, *, overwrite: bool = False) -> Path:
    """Write `instance` to an instance file.

    Args:
        instance: the instance.
        path: the file to write (parent directories are created); a name ending in
            ``.gz`` is written gzip-compressed (deterministic bytes: ``mtime=0``).
        overwrite: replace an existing file; without it an existing file is an error.

    Returns:
        The path written.

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
        FileFormatError: the file cannot be written, or the meta holds non-JSON values.
    """
    doc = instance_to_dict(instance)
    return _write_text(path, _dumps(doc), overwrite)


def load_instance(path: PathLike) -> Instance:
    """Read an instance file.

    One load path, for files as :func:`save_instance` writes them: pydantic-core parses
    the bytes and checks their structure in one pass, building the Op, Tensor and Recipe
    objects itself (no intermediate dicts); then the checks this parser does not make
    (repeated keys, ``meta``'s values) and the Instance's checks of meaning run on the
    result. Everything else takes the exact path (Python's JSON parser, a full walk, the
    schema, then :func:`instance_from_dict`): a file the schema refuses (which the exact
    path then names), a file that leaves optional fields out, and one whose JSON text,
    escapes or repeated keys pydantic-core may read differently from Python's. Every
    message names the file, the field (carried by the
    :class:`~slackopt.errors.InstanceError` for a problem of meaning) and the fix.
    ``python benchmarks/load_speed.py`` measures MB/s, peak memory and how soon a bad
    field is reported.

    Args:
        path: the file: JSON, or gzip-compressed JSON (recognised by its magic bytes;
            a ``.gz`` name without them is refused).

    Returns:
        The Instance (validated).

    Raises:
        FileFormatError: naming the file, the field and a fix, for any problem: missing or
            unreadable file, a corrupt gzip stream, not JSON, NaN/Infinity tokens, wrong
            format or schema version, a missing/unknown/mistyped field, or a malformed
            instance.
    """
    with _gc_paused():
        return _load_instance(path)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: building a million objects that form no
    cycles would otherwise trigger full collections that rescan all of them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load_instance(path: PathLike) -> Instance:
    source = str(path)
    data = _read_bytes(path)
    try:
        m = _FAST_SCHEMA.validate_json(data)
    except ValidationError:  # (or an optional field left out)
        return _refusal(source, data)
    keys = data.count(b'":')  # (asked by both checks)
    if not (_escape_free(data, keys) and _no_repeated_keys(data, m, keys)):
        return _load_exact(source)  # or "storage": null, "mutated_by": []
    del data  # memory: the bytes are no longer needed
    if "meta" in m:
        m["meta"] = _normalize(m["meta"], source, ("meta",))
    try:
        return _instance_of(m)
    except InstanceError as e:
        raise _file_error(source, e) from None


def _refusal(source: str, data: bytes) -> Instance:
    """The error path of :func:`load_instance`, for a file the one-pass schema refused:
    the general schema (optional fields may be left out) names the first problem of
    structure, with the item's name; a file it accepts, or whose JSON text or escapes it
    may read differently from Python's, takes the exact path."""
    try:
        _INSTANCE_SCHEMA.validate_json(data)
    except ValidationError as e:
        types_ = {err["type"] for err in e.errors(include_url=False)}
        if not any(t.startswith("json") or t == "finite_number" for t in types_) \
                and _escape_free(data):
            import pydantic_core

            raw = pydantic_core.from_json(data)
            _check_header(source, raw, INSTANCE_FORMAT, INSTANCE_SCHEMA_VERSIONS)
            raise _pydantic_error(source, e, raw, InstanceFileModel) from None
    return _load_exact(source)


def _load_exact(source: str) -> Instance:
    """The exact path (the error path of :func:`load_instance`): the file read by
    Python's JSON parser, walked, checked by the schema and built; names the first
    problem."""
    return instance_from_dict(_read_json(source), source=source)


def _escape_free(data: bytes, keys: int | None = None) -> bool:
    """No \\u or \\/ escapes and no space between a key and its colon: then every key
    ``K`` appears in the text exactly as ``json.dumps(K) + ":"``.

    Whitespace between a quote and a colon (JSON's four kinds, and vertical tab and form
    feed for text a parser stopped reading early) needs one of them right after a quote
    and one right before a colon. Substring scans (fast byte searches, unlike a regular
    expression over the whole file) look for both; if both occur anywhere, the answer
    is a conservative False (the exact path then reads the file). `keys`:
    ``data.count(b'":')`` when the caller has counted it already.
    """
    if b"\\" in data and (b"\\u" in data or b"\\/" in data):  # (one scan if no escape)
        return False
    if data.count(b":") == (keys if keys is not None else data.count(b'":')):
        return True  # every colon follows a quote (one fast count, one search)
    ws = (b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c")
    return not (any(b'"' + w in data for w in ws) and any(w + b":" in data for w in ws))


def _no_repeated_keys(data: bytes, m: Mapping[str, Any], keys: int) -> bool:
    """Whether no object of the file repeats a key (a parser keeps the last value).

    In :func:`_escape_free` text every key is written as ``"key":``, so the text holds
    ``":`` at least once per key it writes, and more often than the parsed objects hold
    keys exactly when a key is repeated (or a string holds an escaped quote before a
    colon: then the exact path decides). `m` holds the Op and Tensor objects of the fast
    schema, whose keys are every field but ``storage`` and ``mutated_by``, which count
    when set (written as null or [] they are not counted, and the exact path reads the
    file). `keys`: ``data.count(b'":')``.
    """
    ops, tensors = m["ops"], m["tensors"]
    held = len(m) + len(m["link"])
    held += len(ops) * len(_DEFAULTS[Op]) + len(tensors) * (len(_DEFAULTS[Tensor])
                                                              - len(_FAST_OPTIONAL))
    n = len(tensors)  # (list.count counts in C)
    held += n - [t.storage for t in tensors].count(None)
    held += n - [t.mutated_by for t in tensors].count(())
    held += len(_DEFAULTS[Recipe]) * (n - [t.recipe for t in tensors].count(None))
    stack = [m.get("meta")]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            held += len(x)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return keys == held


# ----------------------------------------------------------------------------- plans
def plan_to_dict(plan: Plan, instance: Instance | str | None = None,
                 meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready document of a plan file.

    Args:
        plan: the plan.
        instance: the instance it plans (checked against it, and its name recorded), or
            just the instance name, or None.
        meta: provenance to record (solver, budget, ...); stored, never interpreted.

    Returns:
        A dict in file order.

    Raises:
        PlanError: the plan does not fit `instance`.
        FileFormatError: `meta` holds values JSON cannot store.
    """
    if isinstance(instance, Instance):
        plan.check(instance)
        name: str | None = instance.name
    else:
        name = instance
    doc: dict[str, Any] = {"format": PLAN_FORMAT, "schema_version": PLAN_SCHEMA_VERSIONS[-1],
                           "instance": name, **plan.to_dict()}
    doc["meta"] = _normalize(dict(meta or {}), "<plan meta>", ("meta",))
    return doc


def plan_from_dict(d: Mapping[str, Any], instance: Instance, source: str = "<dict>") -> Plan:
    """Validate a plan document against `instance` and build the Plan.

    Args:
        d: the parsed document.
        instance: the instance the plan is for; every saved tensor must get exactly one
            decision and no other name may appear.
        source: what to call the document in error messages.

    Returns:
        The Plan, aligned with ``instance.saved_names``.

    Raises:
        FileFormatError: wrong format/version/structure, decisions missing for some saved
            tensors or naming tensors that are not saved tensors of the instance, an unknown
            policy, or recomp of a tensor that cannot be rebuilt.
    """
    _check_header(source, d, PLAN_FORMAT, PLAN_SCHEMA_VERSIONS)
    raw = _normalize(d, source)
    try:
        m = PlanFileModel.model_validate(raw)
    except ValidationError as e:
        raise _pydantic_error(source, e, raw, PlanFileModel) from None
    made_for = (f" (the plan was made for instance '{m.instance}')"
                if m.instance and m.instance != instance.name else "")
    if m.policy not in POLICIES:
        raise FileFormatError(source, "policy", f"runtime policy '{m.policy}' is unknown",
                              f"use one of {', '.join(POLICIES)}")
    try:
        runtime_params = check_runtime_params(m.policy, m.runtime_params)
    except PlanError as e:
        raise FileFormatError(source, "runtime_params", str(e),
                              "see slackopt.plan.RUNTIME_PARAMS") from None
    saved = set(instance.saved_names)
    unknown = [n for n in m.decisions if n not in saved]
    if unknown:
        kind = ("not a saved tensor" if unknown[0] in {t.name for t in instance.tensors}
                else "not a tensor")
        raise FileFormatError(
            source, f"decisions.{unknown[0]}",
            f"'{unknown[0]}' is {kind} of instance '{instance.name}'" + _more(unknown)
            + made_for, "decide only the saved tensors of this instance (`slackopt describe`)")
    missing = [n for n in instance.saved_names if n not in m.decisions]
    if missing:
        shown = ", ".join(f"'{n}'" for n in missing[:5])
        raise FileFormatError(
            source, "decisions", f"no decision for {len(missing)} saved tensor"
            f"{'s' if len(missing) > 1 else ''} of instance '{instance.name}': {shown}"
            f"{', ...' if len(missing) > 5 else ''}" + made_for,
            "give every saved tensor a decision: keep, swap or recomp")
    codes = np.array([DECISION_NAMES.index(m.decisions[n]) for n in instance.saved_names],
                     dtype=np.int8)
    try:
        plan = Plan(codes, instance.saved_names, m.policy, runtime_params)
        plan.check(instance)
    except PlanError as e:
        bad = _QUOTED.search(str(e))
        field = f"decisions.{bad.group(1)}" if bad else "decisions"
        fix = ("give all views of one storage the same decision" if "views of one storage"
               in str(e) else "plan keep or swap for tensors that cannot be rebuilt")
        raise FileFormatError(source, field, str(e), fix) from None
    return plan


def _more(names: list[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def save_plan(plan: Plan, path: PathLike, instance: Instance | str | None = None,
              overwrite: bool = False, *, meta: Mapping[str, Any] | None = None) -> Path:
    """Write `plan` to a plan file.

    Args:
        plan: the plan.
        path: the file to write (parent directories are created).
        instance: the instance it plans (checked, name recorded), its name, or None.
        overwrite: replace an existing file; without it an existing file is an error.
        meta: provenance (solver, params, budget_bytes, ...); stored, never interpreted.

    Returns:
        The path written.

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
        PlanError: the plan does not fit `instance`.
        FileFormatError: the file cannot be written or `meta` is not JSON-storable.
    """
    return _write_text(path, _dumps(plan_to_dict(plan, instance, meta)), overwrite)


def load_plan(path: PathLike, instance: Instance) -> Plan:
    """Read a plan file for `instance`.

    Args:
        path: the file.
        instance: the instance the plan is for.

    Returns:
        The Plan, aligned with ``instance.saved_names``.

    Raises:
        FileFormatError: naming the file, the field and a fix, for any problem (see
            :func:`plan_from_dict`).
    """
    return plan_from_dict(_read_json(path), instance, source=str(path))


class PlanFile(NamedTuple):
    """A plan file read with its header.

    Attributes:
        plan: the Plan, aligned with the instance's saved tensors.
        instance: the instance name the file says it was made for, or None.
        budget_bytes: the budget M (bytes) the plan was made for (``meta.budget_bytes``,
            which ``slackopt solve -o`` writes), or None if the file records none.
        meta: the file's ``meta`` object (provenance).
    """

    plan: Plan
    instance: str | None
    budget_bytes: int | None
    meta: dict[str, Any]


def read_plan_file(path: PathLike, instance: Instance) -> PlanFile:
    """Read a plan file for `instance` with its header (made-for instance, budget, meta).

    Args:
        path: the file.
        instance: the instance the plan is for.

    Returns:
        A :class:`PlanFile`.

    Raises:
        FileFormatError: as :func:`load_plan`, or ``meta.budget_bytes`` that is not an
            integer >= 0 (naming the field and the fix).
    """
    doc = _read_json(path)
    plan = plan_from_dict(doc, instance, source=str(path))
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    m = meta.get("budget_bytes")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 0):
        raise FileFormatError(str(path), "meta.budget_bytes", f"{m!r} is not an integer >= 0",
                              "remove it, or give --budget to choose the budget")
    made_for = doc.get("instance")
    return PlanFile(plan, made_for if isinstance(made_for, str) else None, m, dict(meta))


__all__ = [
    "INSTANCE_FORMAT", "INSTANCE_SCHEMA_VERSIONS", "OutputExistsError", "PLAN_FORMAT",
    "PLAN_SCHEMA_VERSIONS", "PlanFile", "instance_from_dict", "instance_to_dict",
    "load_instance", "load_plan", "plan_from_dict", "plan_to_dict", "read_plan_file",
    "save_instance", "save_plan",
]
