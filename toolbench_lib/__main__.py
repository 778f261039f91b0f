"""``python -m toolbench_lib``."""

import sys

from .cli import main

sys.exit(main())
