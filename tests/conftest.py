"""Shared pytest configuration. The tests are one package (``tests/__init__.py``): shared
builders live in helper modules imported by package name (``tests.helpers``,
``tests.strategies``, ``tests.planner_instances``, ``tests.torch_models``), never through
sys.path."""
