"""`store info|upgrade|copy`: which job store this is (DLGUIDE_STORE_URL), its schema, and moving it.

`info --json` -> {"backend", "url" (password masked), "schema_version", "jobs"}, read without
writing anything (a store that needs an upgrade is described, not upgraded). `upgrade` migrates
(PostgreSQL upgrades only this way; SQLite also upgrades itself when opened). `copy --to URL` copies
every job and its metrics into another store; a second run copies nothing new.
"""

from __future__ import annotations

import argparse
import json

from dlguide_core.cli.common import EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("store", help="the job store: describe it, upgrade its schema, copy it elsewhere")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("info", help="backend, URL (password masked), schema version, job count").add_argument(
        "--json", action="store_true")
    sub.add_parser("upgrade", help="migrate the store to this dlguide's schema version")
    copy = sub.add_parser("copy", help="copy every job and its metrics into another store")
    copy.add_argument("--to", required=True, metavar="URL",
                      help="target store: postgresql://USER:PASSWORD@HOST:PORT/DB or sqlite:///PATH")
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

    source, target = open_store(), open_store(args.to)
    report = copy_store(source, target)
    print(f"copied {report.jobs} jobs, {report.steps} steps, {report.epochs} epochs to {target.url.masked} "
          f"({report.total_jobs} jobs in the source, all there)")
    return EXIT_OK
