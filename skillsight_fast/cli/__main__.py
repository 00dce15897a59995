"""``python -m skillsight_fast.cli``: the same as the ``skillsight`` command."""

import sys

from skillsight_fast.cli import main

sys.exit(main())
