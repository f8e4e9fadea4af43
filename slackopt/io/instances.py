"""Instance files: the document of an instance and back, and the one-pass loader.

The file format: :mod:`slackopt.io`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import operator
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from slackopt.errors import FileFormatError, InstanceError
from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor, UnitSpan
from slackopt.io.schemas import (
    FAST_OPTIONAL,
    FAST_SCHEMA,
    FIELD_DEFAULTS,
    INSTANCE_FORMAT,
    INSTANCE_SCHEMA,
    INSTANCE_SCHEMA_VERSIONS,
    InstanceFileModel,
    check_header,
    pydantic_error,
)
from slackopt.io.text import PathLike, dumps, normalize, read_bytes, read_json, write_text
from slackopt.stage import schedule_of


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
        "meta": normalize(dict(instance.meta), "<instance meta>", ("meta",)),
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
    check_header(source, d, INSTANCE_FORMAT, INSTANCE_SCHEMA_VERSIONS)
    raw = normalize(d, source)
    try:
        m = INSTANCE_SCHEMA.validate_python(raw)
    except ValidationError as e:
        raise pydantic_error(source, e, raw, InstanceFileModel) from None
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
        inst = _instance_of(built)
        schedule_of(inst)  # a stage's schedule record must be its units' schedule
    except InstanceError as e:
        raise _file_error(source, e) from None
    return inst


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
    return write_text(path, dumps(doc), overwrite)


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
    data = read_bytes(path)
    try:
        m = FAST_SCHEMA.validate_json(data)
    except ValidationError:  # (or an optional field left out)
        return _refusal(source, data)
    keys = data.count(b'":')  # (asked by both checks)
    if not (_escape_free(data, keys) and _no_repeated_keys(data, m, keys)):
        return _load_exact(source)  # or "storage": null, "mutated_by": []
    del data  # memory: the bytes are no longer needed
    if "meta" in m:
        m["meta"] = normalize(m["meta"], source, ("meta",))
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
        INSTANCE_SCHEMA.validate_json(data)
    except ValidationError as e:
        types_ = {err["type"] for err in e.errors(include_url=False)}
        if not any(t.startswith("json") or t == "finite_number" for t in types_) \
                and _escape_free(data):
            import pydantic_core

            raw = pydantic_core.from_json(data)
            check_header(source, raw, INSTANCE_FORMAT, INSTANCE_SCHEMA_VERSIONS)
            raise pydantic_error(source, e, raw, InstanceFileModel) from None
    return _load_exact(source)


def _load_exact(source: str) -> Instance:
    """The exact path (the error path of :func:`load_instance`): the file read by
    Python's JSON parser, walked, checked by the schema and built; names the first
    problem."""
    return instance_from_dict(read_json(source), source=source)


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
    held += len(ops) * len(FIELD_DEFAULTS[Op]) + len(tensors) * (len(FIELD_DEFAULTS[Tensor])
                                                              - len(FAST_OPTIONAL))
    n = len(tensors)  # (list.count counts in C)
    held += n - [t.storage for t in tensors].count(None)
    held += n - [t.mutated_by for t in tensors].count(())
    held += len(FIELD_DEFAULTS[Recipe]) * (n - [t.recipe for t in tensors].count(None))
    stack = [m.get("meta")]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            held += len(x)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return keys == held
