"""``python -m approxmul_cffi``: the same as the ``approxmul`` command."""

import sys

from .cli import main

sys.exit(main())
