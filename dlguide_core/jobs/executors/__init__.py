"""Executors: where a job's process runs, behind one interface, each declared once by name.

It owns the executor contract and its typed records (base), the registry of executors by name (registry),
the local executor that wraps today's queue (local), Slurm (slurm, with its batch script and commands),
Ray (ray), the job process's entry on a scheduler's node (job_entry) and the tracker that folds a
scheduler's view into the store (tracking). It may import the base modules, training's configs and the rest
of jobs; nothing in jobs outside this package imports it, only the CLI and the UI do.
"""
