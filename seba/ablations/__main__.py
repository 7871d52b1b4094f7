"""python -m seba.ablations queue | collect (seba/ablations/cli.py)."""

import sys

from seba.ablations.cli import main

if __name__ == "__main__":  # imported (the stages' warm worker imports every module): nothing runs
    sys.exit(main())
