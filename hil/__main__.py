"""``python -m hil``: the progressive-hil command line."""

import sys

from .cli import main

sys.exit(main())
