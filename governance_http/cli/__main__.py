"""``python -m governance_http.cli``: the ``governance`` command."""

import sys

from governance_http.cli import main

sys.exit(main())
