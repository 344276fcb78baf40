#!/usr/bin/env bash
# The booth under a crowd on a lent GPU (issue 30), in one command from the repository root:
#
#     OUT=/path/to/results bash bench/gpu_booth_load.sh
#
# The GPU machine has torch+CUDA and Python 3.12 but no Streamlit, no Plotly and no package index: the wheels
# they need are carried in .whl/ (cp312, manylinux x86_64, ~100 MB), fetched beforehand on a machine with an index:
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     altair==6.3.0 anyio==4.16.0 attrs==26.1.0 certifi==2026.10.19.post1 charset-normalizer==3.5.3 click==8.5.1 \
#     h11==0.16.0 idna==3.20 itsdangerous==2.2.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 \
#     narwhals==2.29.0 pandas==3.1.1 plotly==7.1.0 protobuf==7.36.2 psutil==7.2.2 pyarrow==26.0.1 pydeck==0.9.3 \
#     python-dateutil==4.0.0 python-multipart==0.0.34 referencing==0.37.0 requests==2.34.2 rpds-py==2026.9.1 \
#     starlette==1.10.0 streamlit==1.67.0 tzdata==2026.6 urllib3==2.8.0 uvicorn==0.54.0 watchdog==7.1.0 \
#     websockets==17.4
#
# (streamlit's and plotly's dependency closure at constraints.txt's versions, less what torch/torchvision bring:
# numpy, pillow, typing-extensions, packaging, jinja2, ...). Each wheel whose distribution the image lacks
# is installed into a folder on PYTHONPATH (never over the image's torch, numpy or pillow). Then, as `make kiosk`
# starts the booth (serve.py, DLGUIDE_KIOSK=1, MALLOC_ARENA_MAX=2; stand-in ImageNet weights of the same shape,
# as bench_kiosk_load makes them when none are cached: the machine cannot download), `python3 -m bench.bench_kiosk_load` runs
# 1, 10 and 50 visitors, sampling nvidia-smi over each measured phase. Results: $OUT/load_<visitors>.json (its result record), the
# logs beside them, and nvidia-smi.csv over the whole run. About 3-4 minutes in all.
set -u
OUT=${OUT:-/tmp/gpu-booth-out}
SITE=${SITE:-/tmp/site-packages}
mkdir -p "$OUT" "$SITE"
cd "$(dirname "$0")/.."

python3 - "$SITE" .whl/*.whl > "$OUT/install.log" 2>&1 <<'PY'
import subprocess, sys
from importlib.metadata import PackageNotFoundError, version

site, wheels = sys.argv[1], sys.argv[2:]
missing = []
for wheel in wheels:
    name = wheel.rsplit("/", 1)[-1].split("-")[0]
    try:
        print(f"{name}: the image has {version(name)}")
    except PackageNotFoundError:
        missing.append(wheel)
print("installing", [w.rsplit("/", 1)[-1] for w in missing], flush=True)
if missing:
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", site,
                    *missing], check=True)
PY
echo "install: rc $? (log: $OUT/install.log)"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import streamlit, plotly, websockets, psutil; print('streamlit', streamlit.__version__)" || exit 1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 1 > "$OUT/nvidia-smi.csv" 2>&1 &
SMI=$!
export MALLOC_ARENA_MAX=2
for spec in "1 10" "10 10" "50 4"; do
  set -- $spec
  echo "== $1 visitors, $2 rounds each: $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout 170 python3 -m bench.bench_kiosk_load --sessions "$1" --rounds "$2" --single-rounds 10 \
    --home /tmp/gpu-booth-home --json "$OUT/load_$1.json" > "$OUT/load_$1.out" 2> "$OUT/load_$1.err"
  echo "   rc $?: $(grep -E '"(concurrent_p95_s|throughput_per_s|batch_histogram)"' "$OUT/load_$1.json" | tr -d '\n ')"
done
kill "$SMI"
cp /tmp/gpu-booth-home/server.log "$OUT/server.log" 2>/dev/null
