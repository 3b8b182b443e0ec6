"""``python -m kafkawire``: the kafkawire command (see kafkawire.cli)."""

import sys

from kafkawire.cli import main

sys.exit(main())
