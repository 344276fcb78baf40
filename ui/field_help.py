"""What each training field means, said once: the tooltip of every field on the Train form (PyTorch and
TensorFlow recipes alike), keyed by the recipe config's field name."""

from __future__ import annotations

MAX_STEPS_RULE = ("The run stops at whichever limit comes first, Epochs or Max steps: Epochs 2 with Max steps 20 "
                  "stops after 20 steps (inside the first epoch when an epoch is longer), or after 2 epochs when "
                  "they take fewer than 20 steps.")

FIELD_HELP: dict[str, str] = {
    "epochs": "Full passes over the training split. " + MAX_STEPS_RULE,
    "max_steps": "Stop after this many optimiser steps (batches), whatever the epoch; 0 means no limit. "
                 + MAX_STEPS_RULE,
    "batch_size": "Images (or reviews) per optimiser step, per device. Larger batches need more memory.",
    "lr": "Learning rate: the size of each optimiser step. Too high and the loss diverges (the charts say so).",
    "image_size": "Side of the square crop the model sees (Inception v3: 299; smaller is faster and less "
                  "accurate). The small CIFAR CNN is fixed at 32.",
    "weights": "Starting weights: ImageNet (fine-tuning, the guide's choice), none (from scratch) or a "
               "checkpoint of an earlier job.",
    "workers": "Processes that decode and augment images beside training (0: in the training process).",
    "device": "auto picks a GPU when PyTorch sees one, else the CPU; cuda is the GPU on CUDA and ROCm builds.",
    "label_smoothing": "Spreads this share of each target over the other classes (0: plain cross-entropy).",
    "seed": "Seeds the shuffling and initialisation: the same seed and settings give the same run.",
    "amp": "Mixed precision (autocast) on a GPU: faster, less memory; ignored on the CPU.",
    "amp_dtype": "The half-precision type mixed precision uses: bfloat16 (no loss scaling) or float16.",
    "channels_last": "NHWC memory layout: often faster convolutions on GPUs with tensor/matrix cores.",
    "hidden_units": "Width of the Dense layer between Flatten and the 10 outputs (the guide: 128).",
    "validation_split": "Share of the training reviews held out to validate each epoch.",
    "max_tokens": "Vocabulary size of the TextVectorization layer (the most frequent words are kept).",
    "sequence_length": "Each review is cut or padded to this many tokens.",
    "embedding_dim": "Size of each word's learned vector (the guide: 16).",
    "dropout": "Share of activations dropped at random while training, against overfitting.",
    "momentum": "SGD momentum: how much of the previous step carries into the next.",
    "weight_decay": "L2 penalty on the weights, against overfitting.",
    "nproc_per_node": "Processes of one data-parallel run (torchrun + DDP), one per device; each takes a batch of "
                      "its own.",
    "max_restarts": "How often torchrun restarts the workers after a failure, from the last checkpoint.",
    "sync_batchnorm": "Batch-norm statistics over every device's batch (GPUs only).",
    "scale_lr": "Multiply the learning rate by the number of processes, as the global batch grows with them.",
    "nnodes": "Machines in the run, this one included.",
    "rdzv_endpoint": "Where the other machines meet this one (torchrun's c10d rendezvous).",
}


def field_help(name: str) -> str:
    return FIELD_HELP.get(name, name.replace("_", " ").capitalize())
