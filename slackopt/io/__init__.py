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

The package, one job per module (each imports only those above it in this list):

- :mod:`slackopt.io.text`: JSON text: reading (gzip included), parsing, normalising,
  deterministic writing and atomic, no-clobber replacement (:class:`OutputExistsError`);
- :mod:`slackopt.io.schemas`: the pydantic schemas, the file headers and how a refusal
  reads (field, problem, fix);
- :mod:`slackopt.io.instances`: instance files (:func:`load_instance`,
  :func:`save_instance`, :func:`instance_to_dict`, :func:`instance_from_dict`);
- :mod:`slackopt.io.plans`: plan files (:func:`load_plan`, :func:`save_plan`,
  :func:`read_plan_file`, :func:`plan_to_dict`, :func:`plan_from_dict`);
- :mod:`slackopt.io.outputs`: the checks before a command writes a file (never over a
  file it reads, never over an existing one without ``--force``); not re-exported here.
"""

from slackopt.io.instances import instance_from_dict, instance_to_dict, load_instance, save_instance
from slackopt.io.plans import (
    PlanFile,
    load_plan,
    plan_from_dict,
    plan_to_dict,
    read_plan_file,
    save_plan,
)
from slackopt.io.schemas import (
    INSTANCE_FORMAT,
    INSTANCE_SCHEMA_VERSIONS,
    PLAN_FORMAT,
    PLAN_SCHEMA_VERSIONS,
    InstanceFileModel,
    PlanFileModel,
)
from slackopt.io.text import GZIP_MAGIC, MAX_NESTING, OutputExistsError, PathLike

__all__ = [
    "GZIP_MAGIC", "INSTANCE_FORMAT", "INSTANCE_SCHEMA_VERSIONS", "MAX_NESTING",
    "OutputExistsError", "PLAN_FORMAT", "PLAN_SCHEMA_VERSIONS", "InstanceFileModel",
    "PathLike", "PlanFile", "PlanFileModel", "instance_from_dict", "instance_to_dict",
    "load_instance", "load_plan", "plan_from_dict", "plan_to_dict", "read_plan_file",
    "save_instance", "save_plan",
]
