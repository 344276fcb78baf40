import sys

from dlguide_core.cli.main import main

sys.exit(main())
