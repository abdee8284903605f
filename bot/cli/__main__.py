"""`python -m bot.cli`: the `debatebot` command without the installed script."""

import sys

from bot.cli import main

sys.exit(main())
