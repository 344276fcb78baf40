# dlguide on a ROCm host. The base image already has ROCm builds of torch/torchvision;
# requirements.txt uses ranges they satisfy, so pip keeps them.
#
#   docker build -t dlguide .
#   docker run -it --device=/dev/kfd --device=/dev/dri --group-add video --ipc=host \
#       --shm-size 8G -p 8501:8501 -v dlguide-data:/data dlguide
FROM rocm/pytorch:rocm6.4.3_ubuntu24.04_py3.12_pytorch_release_2.6.0

WORKDIR /app
ENV PYTHONUNBUFFERED=1 MALLOC_ARENA_MAX=2 TORCH_HOME=/opt/torch DLGUIDE_HOME=/data/dlguide DLGUIDE_DATA_ROOTS=/data/datasets
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
# Fetch the ImageNet weights at build time (checksum-verified) so the container classifies offline.
RUN python -c "from dlguide_core.models import fetch_imagenet_weights as f; print(f())" \
    && mkdir -p /data/dlguide /data/datasets

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
CMD ["python", "serve.py", "--server.port=8501", "--server.address=0.0.0.0"]
