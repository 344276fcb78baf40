# dlguide on a ROCm host. The base image already has ROCm builds of torch/torchvision;
# requirements.txt uses ranges they satisfy, so pip keeps them. MIGraphX and ONNX Runtime's
# ROCm build are installed in one step below (check: `docker run ... python -m dlguide_core devices --json`
# shows "migraphx": true and MIGraphXExecutionProvider among "onnxruntime_providers").
#
#   docker build -t dlguide .
#   docker run -it --device=/dev/kfd --device=/dev/dri --group-add video --shm-size 8G \
#       -e DLGUIDE_ALLOWED_HOSTS=dlguide.lab.example -p 8501:8501 -v dlguide-data:/data dlguide
# It serves 0.0.0.0 (every interface of the container) and refuses to start without DLGUIDE_ALLOWED_HOSTS, the
# host names visitors use (README: Serving to a team). --shm-size, not --ipc=host: DataLoader workers hand
# batches over in /dev/shm (Docker's 64 MB default is too small for Inception batches), and a private /dev/shm
# of that size does it without sharing the host's IPC namespace with the container.
FROM rocm/pytorch:rocm6.4.3_ubuntu24.04_py3.12_pytorch_release_2.6.0

WORKDIR /app
ENV PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2 TORCH_HOME=/opt/torch DLGUIDE_HOME=/data/dlguide DLGUIDE_DATA_ROOTS=/data/datasets
# MIGraphX from the ROCm apt repository the base image already has: its Python module lands in
# /opt/rocm/lib (for this image's Python 3.12), put on the path as AMD's docs say. `half` is the
# header ONNX Runtime's MIGraphX execution provider was built against (AMD's ORT install notes).
ARG ROCM_WHEELS=https://repo.radeon.com/rocm/manylinux/rocm-rel-6.4.1/
ENV ROCM_PATH=/opt/rocm PYTHONPATH=/opt/rocm/lib
COPY requirements.txt .
# The app's requirements without the CPU onnxruntime wheel, then ONNX Runtime's ROCm build (MIGraphX and
# ROCm execution providers) from AMD's package index; the last line fails the build if either is missing.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends migraphx migraphx-dev half \
    && rm -rf /var/lib/apt/lists/* \
    && grep -v '^onnxruntime' requirements.txt > /tmp/requirements-rocm.txt \
    && pip install --no-cache-dir -r /tmp/requirements-rocm.txt \
    && pip uninstall -y onnxruntime \
    && pip install --no-cache-dir onnxruntime-rocm -f "$ROCM_WHEELS" \
    && python -c "import migraphx, onnxruntime as o; assert 'MIGraphXExecutionProvider' in o.get_available_providers()"
COPY . .
# Fetch the ImageNet weights at build time (checksum-verified) so the container classifies offline.
RUN python -c "from dlguide_core.vision.models import fetch_imagenet_weights as f; print(f())" \
    && mkdir -p /data/dlguide /data/datasets \
    && useradd --create-home --uid 10001 --user-group dlguide \
    && chown -R dlguide:dlguide /data
# Not root: the app and its job processes run as `dlguide` (the code and weights stay root-owned, read-only;
# /data is its own). GPU access comes from the run's --device and --group-add flags.
USER dlguide

EXPOSE 8501
# The health check names the first allowed host (a wildcard's "*" replaced): any other Host gets 400.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import os, urllib.request as u; h = os.environ['DLGUIDE_ALLOWED_HOSTS'].split(',')[0].strip().replace('*', 'health'); u.urlopen(u.Request('http://127.0.0.1:8501/_stcore/health', headers={'Host': h}), timeout=4)"
CMD ["python", "serve.py", "--server.port=8501", "--server.address=0.0.0.0"]
