"""``python -m hil``: the progressive-hil command line."""

import sys

from hil.cli import main

sys.exit(main())
