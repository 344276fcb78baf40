# dlguide's image: two targets that run the same app layers (README, "Docker").
# Classic-builder syntax only (no BuildKit: no `RUN --mount`, no heredocs), so Debian's engine builds it.
#
# cpu (CPU-only hosts: a booth on a laptop or a CPU server, CI): python:3.11-slim-bookworm with the CPU torch wheels
#   from TORCH_INDEX_URL (default the PyTorch CPU index: an image of about 2 GB; PyPI's CUDA torch adds about 4 GB):
#   docker build --target cpu -t dlguide-cpu .
#   docker run -p 127.0.0.1:8501:8501 -e DLGUIDE_ALLOWED_HOSTS=localhost -v dlguide-data:/data dlguide-cpu
#
# rocm (the default, the last stage): rocm/pytorch with its ROCm torch/torchvision kept (requirements.txt uses
#   ranges they satisfy, so pip keeps them), MIGraphX and ONNX Runtime's ROCm build (check: `docker run ...
#   dlguide devices --json` shows "migraphx": true and MIGraphXExecutionProvider among "onnxruntime_providers"):
#   docker build -t dlguide .
#   docker run -it --device=/dev/kfd --device=/dev/dri --group-add video --shm-size 8G \
#       -e DLGUIDE_ALLOWED_HOSTS=dlguide.lab.example -p 8501:8501 -v dlguide-data:/data dlguide
#
# Both serve 0.0.0.0 (every interface of the container) and refuse to start without DLGUIDE_ALLOWED_HOSTS, the host
# names visitors use (README: Serving to a team). --shm-size, not --ipc=host: DataLoader workers hand batches over in
# /dev/shm (Docker's 64 MB default is too small for Inception batches), and a private /dev/shm of that size does it
# without sharing the host's IPC namespace with the container.
# `--build-arg OFFLINE=1` builds without the ImageNet weights (air-gapped sites): mount them read-only at
# /opt/torch/hub/checkpoints (`-v /path/to/checkpoints:/opt/torch/hub/checkpoints:ro`); the app says so.
# Everything from "app layers" to the stage's end is the same text in both stages (tests/docker/test_dockerfile.py).

FROM python:3.11-slim-bookworm AS cpu

WORKDIR /app
ENV PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2 PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU wheels' index (torch, torchvision and their dependencies): PyPI's own torch is the CUDA build (several GB).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# tini: PID 1, reaping every orphaned process (job processes outlive the server that started them).
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" "torch>=2.6" "torchvision>=0.21" \
    && pip install --no-cache-dir -r requirements.txt \
    && python -c "import torch, torchvision, onnxruntime, streamlit; assert not torch.version.cuda, torch.__version__"

# ---- app layers (the same in both targets) ----
ARG OFFLINE=0
# OFFLINE=1 also keeps the app from trying to download them (into a folder the user cannot write): it says where
# to mount them instead.
ENV TORCH_HOME=/opt/torch DLGUIDE_HOME=/data/dlguide DLGUIDE_DATA_ROOTS=/data/datasets DLGUIDE_CONTAINER=1 \
    DLGUIDE_OFFLINE=$OFFLINE
COPY . /app
# The package installed editable (`dlguide` on PATH, job processes find it from any folder), its bytecode written
# now (the code is read-only for the user), the weights fetched unless OFFLINE=1, and /data for the user.
RUN pip install --no-cache-dir --no-deps -e /app \
    && python -m compileall -q /app/dlguide_core /app/ui /app/web /app/pages /app/app.py /app/serve.py \
    && mkdir -p "$TORCH_HOME/hub/checkpoints" /data/dlguide /data/datasets \
    && if [ "$OFFLINE" = 1 ]; then echo "OFFLINE=1: no ImageNet weights; mount them at $TORCH_HOME/hub/checkpoints"; \
       else python -c "from dlguide_core.vision.models import fetch_imagenet_weights as f; print(f())"; fi \
    && useradd --create-home --uid 10001 --user-group dlguide \
    && chown -R 10001:10001 /data
# Not root: the app and its job processes run as `dlguide` (uid 10001, numeric so that a runtime's non-root check
# can read it; the code and weights stay root-owned, read-only;
# /data is its own). GPU access comes from the run's --device and --group-add flags.
USER 10001
VOLUME /data
EXPOSE 8501
# The health check names the first allowed host (a wildcard's "*" replaced): any other Host gets 400.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s \
    CMD ["python", "-c", "import os, urllib.request as u; h = os.environ['DLGUIDE_ALLOWED_HOSTS'].split(',')[0].strip().replace('*', 'health'); u.urlopen(u.Request('http://127.0.0.1:8501/_stcore/health', headers={'Host': h}), timeout=4)"]
# tini reaps; dlguide_core.container passes `docker stop`'s SIGTERM to every process (the server and local jobs,
# which stop at a checkpoint, `interrupted`) and waits for them within Docker's 10 s.
ENTRYPOINT ["tini", "--", "python", "-m", "dlguide_core.container"]
CMD ["python", "serve.py", "--server.port=8501", "--server.address=0.0.0.0"]

FROM rocm/pytorch:rocm6.4.3_ubuntu24.04_py3.12_pytorch_release_2.6.0 AS rocm

WORKDIR /app
ENV PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2 PIP_DISABLE_PIP_VERSION_CHECK=1
# MIGraphX from the ROCm apt repository the base image already has: its Python module lands in
# /opt/rocm/lib (for this image's Python 3.12), put on the path as AMD's docs say. `half` is the
# header ONNX Runtime's MIGraphX execution provider was built against (AMD's ORT install notes).
ARG ROCM_WHEELS=https://repo.radeon.com/rocm/manylinux/rocm-rel-6.4.1/
ENV ROCM_PATH=/opt/rocm PYTHONPATH=/opt/rocm/lib
COPY requirements.txt .
# tini (PID 1, from Ubuntu's universe), the app's requirements without the CPU onnxruntime wheel, then ONNX
# Runtime's ROCm build (MIGraphX and ROCm execution providers) from AMD's package index; the last line fails the
# build if either is missing.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends migraphx migraphx-dev half tini \
    && rm -rf /var/lib/apt/lists/* \
    && grep -v '^onnxruntime' requirements.txt > /tmp/requirements-rocm.txt \
    && pip install --no-cache-dir -r /tmp/requirements-rocm.txt \
    && pip uninstall -y onnxruntime \
    && pip install --no-cache-dir onnxruntime-rocm -f "$ROCM_WHEELS" \
    && python -c "import migraphx, onnxruntime as o; assert 'MIGraphXExecutionProvider' in o.get_available_providers()"

# ---- app layers (the same in both targets) ----
ARG OFFLINE=0
# OFFLINE=1 also keeps the app from trying to download them (into a folder the user cannot write): it says where
# to mount them instead.
ENV TORCH_HOME=/opt/torch DLGUIDE_HOME=/data/dlguide DLGUIDE_DATA_ROOTS=/data/datasets DLGUIDE_CONTAINER=1 \
    DLGUIDE_OFFLINE=$OFFLINE
COPY . /app
# The package installed editable (`dlguide` on PATH, job processes find it from any folder), its bytecode written
# now (the code is read-only for the user), the weights fetched unless OFFLINE=1, and /data for the user.
RUN pip install --no-cache-dir --no-deps -e /app \
    && python -m compileall -q /app/dlguide_core /app/ui /app/web /app/pages /app/app.py /app/serve.py \
    && mkdir -p "$TORCH_HOME/hub/checkpoints" /data/dlguide /data/datasets \
    && if [ "$OFFLINE" = 1 ]; then echo "OFFLINE=1: no ImageNet weights; mount them at $TORCH_HOME/hub/checkpoints"; \
       else python -c "from dlguide_core.vision.models import fetch_imagenet_weights as f; print(f())"; fi \
    && useradd --create-home --uid 10001 --user-group dlguide \
    && chown -R 10001:10001 /data
# Not root: the app and its job processes run as `dlguide` (uid 10001, numeric so that a runtime's non-root check
# can read it; the code and weights stay root-owned, read-only;
# /data is its own). GPU access comes from the run's --device and --group-add flags.
USER 10001
VOLUME /data
EXPOSE 8501
# The health check names the first allowed host (a wildcard's "*" replaced): any other Host gets 400.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s \
    CMD ["python", "-c", "import os, urllib.request as u; h = os.environ['DLGUIDE_ALLOWED_HOSTS'].split(',')[0].strip().replace('*', 'health'); u.urlopen(u.Request('http://127.0.0.1:8501/_stcore/health', headers={'Host': h}), timeout=4)"]
# tini reaps; dlguide_core.container passes `docker stop`'s SIGTERM to every process (the server and local jobs,
# which stop at a checkpoint, `interrupted`) and waits for them within Docker's 10 s.
ENTRYPOINT ["tini", "--", "python", "-m", "dlguide_core.container"]
CMD ["python", "serve.py", "--server.port=8501", "--server.address=0.0.0.0"]
