"""Training: the recipes and the loops that run them, and what they report through.

It owns the run contract (configs: the frozen configs, RunContext, RunResult), the recipe registry
(recipes), the PyTorch loop (loop, with factories for its model, optimiser, loaders and device), data
parallelism (distributed: DDP building blocks; distributed_sinks: the writer-rank and stop-flag sinks), the
sink interface and simple sinks (sinks), TensorBoard writing (tensorboard), curve helpers (metrics,
diagnostics) and the config fields' declarations (fields: ranges, the device rule, CLI flags). It may import
the base modules, vision and data; never `inference`, `jobs` nor the TensorFlow recipes (`dlguide_core.tf`):
a loop reports through the TrainingSink it is handed, so it needs no job store.
"""
