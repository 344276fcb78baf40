"""`store info|upgrade|copy`: which job store this is (DLGUIDE_STORE_URL), its schema, and moving it.

`info --json` -> {"backend", "url" (password masked), "schema_version", "jobs"}, read without
writing anything (a store that needs an upgrade is described, not upgraded). `upgrade` migrates
(PostgreSQL upgrades only this way; SQLite also upgrades itself when opened). `copy` copies every job
and its metrics into another store; a second run copies nothing new. Its target comes from
DLGUIDE_STORE_COPY_TO, or from stdin with `--to -`: never argv, which every local user reads in `ps`.
`--to URL` still works, with a one-line warning on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from dlguide_core.cli.common import EXIT_OK
from dlguide_core.errors import UsageError

COPY_TO_ENV = "DLGUIDE_STORE_COPY_TO"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("store", help="the job store: describe it, upgrade its schema, copy it elsewhere")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("info", help="backend, URL (password masked), schema version, job count").add_argument(
        "--json", action="store_true")
    sub.add_parser("upgrade", help="migrate the store to this dlguide's schema version")
    copy = sub.add_parser("copy", help="copy every job and its metrics into another store")
    copy.add_argument("--to", metavar="URL", help=f"target store; default: {COPY_TO_ENV}. `-` reads it from stdin. "
                      "A URL here is visible to every local user (ps): pass a password through the variable or stdin")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return {"info": _info, "upgrade": _upgrade, "copy": _copy}[args.action](args)


def _info(args: argparse.Namespace) -> int:
    from dlguide_core.jobs.store_info import describe

    info = describe()
    if args.json:
        print(json.dumps(info))
    else:
        print(f"{info['backend']} store {info['url']}: schema v{info['schema_version']}, {info['jobs']} jobs")
    return EXIT_OK


def _upgrade(args: argparse.Namespace) -> int:
    from dlguide_core.jobs.store import open_store
    from dlguide_core.jobs.store_info import describe

    before = describe()["schema_version"]
    store = open_store(upgrade=True)
    print(f"store {store.url.masked}: schema v{store.schema_version}"
          + (f" (was v{before})" if before != store.schema_version else " (already current)"))
    return EXIT_OK


def _copy(args: argparse.Namespace) -> int:
    from dlguide_core.jobs.store import open_store
    from dlguide_core.jobs.store_copy import copy_store

    source, target = open_store(), open_store(_copy_target(args.to))
    report = copy_store(source, target)
    print(f"copied {report.jobs} jobs, {report.steps} steps, {report.epochs} epochs to {target.url.masked} "
          f"({report.total_jobs} jobs in the source, all there)")
    return EXIT_OK


def _copy_target(flag: str | None) -> str:
    """The target URL: `--to -` reads stdin's first line; `--to URL` is taken with a warning (argv is public);
    else DLGUIDE_STORE_COPY_TO."""
    if flag == "-":
        target = sys.stdin.readline().strip()
    elif flag:
        print(f"warning: --to puts the URL in this command's argv, which every local user can read (ps); "
              f"set {COPY_TO_ENV} or pass it on stdin with --to -", file=sys.stderr)
        target = flag
    else:
        target = os.environ.get(COPY_TO_ENV, "").strip()
    if not target:
        raise UsageError(f"no target store: set {COPY_TO_ENV}=URL, or pass the URL on stdin with --to -")
    return target
