"""dlguide_core.jobs.store."""
