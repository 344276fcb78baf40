"""The command line, `python -m dlguide_core ...`: a thin argparse layer over the core, one module per subcommand.

`main` builds the parser and maps errors to the exit codes (`common`); each subcommand module registers its
parser and imports what it needs inside its handler, so `--help` and `jobs list/show` never import torch.
It may import every other part of the core; nothing in the core imports it.
"""
