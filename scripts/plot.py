"""Learning curves of run directories: a thin caller of `anakin plot` (anakin/curves.py).

python scripts/plot.py runs/a runs/b --out curves.png     # = anakin plot runs/a runs/b ...
"""

import sys

from anakin import cli

if __name__ == "__main__":
    sys.exit(cli.main(["plot", *sys.argv[1:]]))
