"""Instances from other tools' files.

- :mod:`~slackopt.importers.checkmate`: Checkmate training graphs (networkx node-link
  JSON, as the Checkmate and Moccasin repositories ship them), ``slackopt import
  checkmate``.

An importer reads the user's copy of a file and builds an
:class:`~slackopt.instance.Instance`; it depends on the instance, the hardware presets
and the errors only (an I/O leaf, like :mod:`slackopt.io`).
"""
