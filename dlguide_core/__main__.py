import sys

from dlguide_core.cli import main

sys.exit(main())
