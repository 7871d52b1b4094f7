"""python -m seba.ablations queue | collect (seba/ablations/cli.py)."""

import sys

from seba.ablations.cli import main

sys.exit(main())
