"""The Train page's live-view redraw at N stored steps: read from the store, smooth, downsample, build
and serialise the figures (what st.plotly_chart sends), using the page's own helpers.

    .venv/bin/python -m bench.bench_training_view [--steps 100000]

Two runs: a PyTorch-style job (no per-step extras) and a TensorFlow-style job whose every step
carries Keras' running accuracy in the extra JSON column (parsed on read, one more chart).
"""

from __future__ import annotations

import os
import tempfile

from bench.common import parser, report, result
from tests.support.training_timing import redraw


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--steps", type=int, default=100_000)
    args = options.parse_args()
    if args.quick:
        args.steps = 2_000
    with tempfile.TemporaryDirectory() as home:
        os.environ["DLGUIDE_HOME"] = home
        figures = {"pytorch_style": redraw(args.steps), "tensorflow_style": redraw(args.steps, tensorflow=True)}
    report(result("bench_training_view", {"steps": args.steps, **figures}), args.json)


if __name__ == "__main__":
    main()
