"""``python -m governance_http``: the ``governance`` command."""

import sys

from governance_http.cli import main

sys.exit(main())
