"""Jobs: the durable job store, the queue, and the processes that run training and evaluation jobs.

It owns the store (store: jobs and statuses over database, with metric_tables for their metrics),
process liveness (liveness, torchrun_log), the job process's sink (store_sink), the queue and how a
job is launched (queue, launch), every job kind this installation runs (catalog: the registry's plug-ins, and
the `evaluate` kind of evaluation_job), the job processes (runner; worker, each torchrun process; stopping,
what both share; foreground, a job run by the process that asked for it),
and what is read back from jobs (comparison, tensorboard_export).
It may import the base modules, vision, data, evaluation and training; no module of those imports it.
"""
