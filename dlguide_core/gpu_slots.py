"""Which GPU a job's process takes: the queue's slot and the one device rule, for every framework.

Torch-free and TensorFlow-free: the PyTorch loop, the torchrun workers, the evaluation job and the
TensorFlow runtime all pick their GPU through `gpu_index`, and the launcher hands each job process its
slot through DLGUIDE_GPU_SLOT.
"""

from __future__ import annotations

import os

# Set by jobs.queue.job_env for each job process: its RunContext.slot (torchrun's workers inherit it).
GPU_SLOT_ENV = "DLGUIDE_GPU_SLOT"


def gpu_index(slot: int, visible: int) -> int:
    """The one device rule, for every framework: a job on `device` auto or cuda runs on the GPU numbered
    `slot` mod `visible` among the GPUs its process sees (torchrun's ranks: slot + LOCAL_RANK).

    The queue gives each job a slot; a multi-device job is started pinned to its block of GPUs
    (CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES, jobs.queue.visible_devices_env), where its first GPU is
    number 0, so its slot in the process is 0; a single-device job sees every GPU and keeps the
    queue's slot. The modulo shares GPUs round-robin when DLGUIDE_MAX_JOBS allows more jobs than GPUs."""
    return slot % visible if visible > 0 else 0


def process_slot(default: int = 0) -> int:
    """RunContext.slot of this process: what the launcher set in DLGUIDE_GPU_SLOT, else `default`
    (a foreground run, a machine that joins a multi-node run)."""
    raw = os.environ.get(GPU_SLOT_ENV, "").strip()
    return int(raw) if raw.isdigit() else default
