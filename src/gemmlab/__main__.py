"""``python -m gemmlab``: the same as the ``gemmlab`` command."""

import sys

from .cli import main

sys.exit(main())
