"""The Train page's dataset scan (issue 18 point 11): a full scan of a data root with N class folders, against what
a rerun costs now that the scan is cached on the roots' mtimes (ui.dataset_picker.roots_signature).

    .venv/bin/python -m bench.bench_train_page_scan [--classes 20000]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.common import parser, report, result
from dlguide_core.data import image_folders
from ui.dataset_picker import roots_signature


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--classes", type=int, default=20000, help="class folders in train/ and in val/")
    args = options.parse_args()
    if args.quick:
        args.classes = 200
    with tempfile.TemporaryDirectory(prefix="dlguide-bench-scan-") as tmp:
        root = Path(tmp) / "roots"
        for split in ("train", "val"):
            for i in range(args.classes):
                folder = root / "big" / split / f"c{i:06d}"
                folder.mkdir(parents=True)
                (folder / "a.jpg").write_bytes(b"x")  # counted by name: the scan never decodes
        began = time.perf_counter()
        image_folders.find_datasets([root])
        scan = time.perf_counter() - began
        began = time.perf_counter()
        for _ in range(10):
            roots_signature([root])
        signature = (time.perf_counter() - began) / 10
    print(f"| {args.classes:,} class folders | full scan {scan:.2f} s | cached rerun (signature) "
          f"{signature * 1e3:.2f} ms |")
    report(result("bench_train_page_scan", {"classes": args.classes, "full_scan_s": scan,
                                            "cached_rerun_ms": signature * 1e3}), args.json)


if __name__ == "__main__":
    main()
