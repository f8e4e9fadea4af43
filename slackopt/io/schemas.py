"""The schemas of instance and plan files (pydantic), their headers, and how a refusal
reads: the field, the problem and the fix.

Instance files are validated as TypedDicts (plain dicts out) by :data:`INSTANCE_SCHEMA`,
or in one pass that builds the Op, Tensor and Recipe objects by :data:`FAST_SCHEMA`;
plan files by :class:`PlanFileModel`. Structure only: what the values mean is checked by
:class:`~slackopt.instance.Instance` and :class:`~slackopt.plan.Plan`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator
from pydantic_core import core_schema as cs
from typing_extensions import TypedDict, is_typeddict

from slackopt.errors import FileFormatError
from slackopt.instance import Op, Recipe, Tensor
from slackopt.io.text import PathLike, fmt_loc

INSTANCE_FORMAT = "slackopt-instance"
PLAN_FORMAT = "slackopt-plan"
INSTANCE_SCHEMA_VERSIONS = (1,)
"""Instance-file schema versions this slackopt reads; it writes the last one."""
PLAN_SCHEMA_VERSIONS = (1,)
"""Plan-file schema versions this slackopt reads; it writes the last one."""


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


INSTANCE_SCHEMA = TypeAdapter(InstanceFileModel)
"""The general instance-file validator: plain dicts out, optional fields may be absent."""


def _objects_schema(schema: dict[str, Any], cls: type, optional: Sequence[str] = ()) -> Any:
    """The core schema that validates what TypedDict `schema` validates but builds a `cls`
    (Op, Tensor, Recipe) in pydantic-core, with every field required except `optional`
    (which take `cls`'s defaults). Lists become tuples; the field checks are those of
    `schema`, so a type error reads the same on both."""
    fields = []
    for name in (f.name for f in dataclasses.fields(cls)):
        sub = _tuples(schema["fields"][name]["schema"])
        if name in optional:
            sub = cs.with_default_schema(sub, default=FIELD_DEFAULTS[cls][name])
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


FIELD_DEFAULTS = {c: {f.name: f.default for f in dataclasses.fields(c)}
                  for c in (Op, Tensor, Recipe)}
"""Op, Tensor, Recipe -> {field name: default}: the values of optional fields a file leaves
out."""
FAST_OPTIONAL = ("storage", "mutated_by")
"""The tensor fields that instance files hold only when set (:func:`instance_to_dict`);
all other op, tensor and recipe fields are required by the fast schema."""


def _fast_instance_schema() -> SchemaValidator:
    """Validator of instance files as :func:`save_instance` writes them (every op, tensor
    and recipe field present but ``storage`` and ``mutated_by``) that builds Op, Tensor and
    Recipe objects in pydantic-core: the top level is :class:`InstanceFileModel`'s, the
    items' checks are those of OpModel and TensorModel. A file it refuses for a missing
    field or its structure goes to the error path of :func:`load_instance`."""
    top = copy.deepcopy(INSTANCE_SCHEMA.core_schema)
    for key, cls, optional in (("ops", Op, ()), ("tensors", Tensor, FAST_OPTIONAL)):
        lst = top["fields"][key]["schema"]
        lst["items_schema"] = _objects_schema(lst["items_schema"], cls, optional)
    return SchemaValidator(top)


FAST_SCHEMA = _fast_instance_schema()
"""The one-pass instance-file validator (:func:`_fast_instance_schema`)."""


class PlanFileModel(_Strict):
    """A plan file (schema version 1)."""

    format: Literal["slackopt-plan"]
    schema_version: Literal[1]
    instance: str | None = None
    policy: str = "barrier_free"
    runtime_params: dict[str, Any] = {}
    decisions: dict[str, Literal["keep", "swap", "recomp"]]
    meta: dict[str, Any] = {}


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


def pydantic_error(path: PathLike, err: ValidationError, raw: Any,
                   top: Any) -> FileFormatError:
    """The FileFormatError of a schema's refusal `err` of document `raw` read from `path`:
    the first problem's field (``tensors[12].size_bytes``, with the item's name), what is
    wrong (and how many more problems there are) and the fix; an unknown field's fix lists
    the fields that `top` (the schema) allows there."""
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
    return FileFormatError(path, fmt_loc(loc), _item_label(raw, loc) + problem, fix)



# ----------------------------------------------------------------------------- checks
def check_header(path: PathLike, raw: Any, fmt: str, versions: tuple[int, ...]) -> None:
    """Refuse a document `raw` (read from `path`) that is not an object, whose ``format``
    is not `fmt` (:data:`INSTANCE_FORMAT` or :data:`PLAN_FORMAT`) or whose
    ``schema_version`` is not one of `versions`.

    Raises:
        FileFormatError: naming the field and the command that writes such a file.
    """
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
