import sys

from runtime.cli import script

sys.exit(script())
