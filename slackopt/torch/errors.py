"""Errors and warnings of the PyTorch wing (no torch needed: the package imports them first).

Every error derives from :class:`~slackopt.errors.SlackoptError`, so the command line
turns it into one line on stderr and exit status 2.
"""

from __future__ import annotations

from slackopt.errors import SlackoptError


class MissingTorchError(SlackoptError, ImportError):
    """PyTorch is not installed; ``pip install 'slackopt[torch]'``."""


class ProfileError(SlackoptError, ValueError):
    """The step cannot be profiled: a bad loss, bad inputs, a bad factory or config, or an
    unknown preset."""


class PlanRuntimeError(SlackoptError, RuntimeError):
    """The step does not match the profiled instance, or the plan cannot be executed."""


class ProfileNote(UserWarning):
    """Something a profile should be read with (a sequence longer than the model's
    position embeddings); the profiler also records it in ``meta["notes"]``."""


__all__ = ["MissingTorchError", "PlanRuntimeError", "ProfileError", "ProfileNote"]
