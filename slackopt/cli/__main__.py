"""``python -m slackopt.cli``: the ``slackopt`` command."""

import sys

from slackopt.cli import main

sys.exit(main())
