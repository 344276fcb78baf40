"""Where things are: the project root, its test data, and the optional `../shared` folder beside the checkout."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMI_FIXTURES = ROOT / "tests" / "support" / "smi"  # rocm-smi / amd-smi outputs of real machines
SHARED = ROOT.parent / "shared"  # absent on a fresh clone: tests that need it skip with a reason
SHARED_TINY = SHARED / "data" / "tiny-imagenet-10"
SHARED_DOG = SHARED / "data" / "samples" / "dog.jpg"
BUNDLED_SAMPLE = ROOT / "dlguide_core" / "samples" / "chelsea.jpg"
