"""python -m approxmul_cffi.cli: the approxmul command without the console script."""

import sys

from . import main

sys.exit(main())
