"""``python -m minitransformer COMMAND``: see minitransformer/cli/."""
import sys

from .cli import main

sys.exit(main())
