"""The benchmarks: one script per comparison, run as modules from the project root (`python -m bench.NAME`; see
bench/common.py). Figures and commands: docs/BENCHMARKS.md."""
