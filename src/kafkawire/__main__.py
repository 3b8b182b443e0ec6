"""``python -m kafkawire``: the kafkawire command (see kafkawire.cli)."""

import sys

from kafkawire.cli import run

sys.exit(run())
