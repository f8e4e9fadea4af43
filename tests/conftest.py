"""Shared pytest configuration. The tests are one package (``tests/__init__.py``): shared
builders live in helper modules imported by package name (``tests.helpers``,
``tests.strategies``, ``tests.planner_instances``, ``tests.torch_models``), never through
sys.path.

Every test runs slackopt's kernels compiled (:mod:`slackopt.jit`): before the first test,
numba's cache is filled when it does not hold them (a fresh clone, or a kernel changed:
about a minute of CPU, once), and ``SLACKOPT_KERNELS=compiled`` is set for this process
and the commands the tests start. tests/test_jit.py starts processes in the other modes
itself.
"""

from __future__ import annotations

import os


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    if os.environ.get("SLACKOPT_KERNELS", "auto") == "python":
        return  # asked for: the whole suite with the kernels as Python
    from slackopt import jit

    jit.ensure_compiled()
    os.environ["SLACKOPT_KERNELS"] = "compiled"
