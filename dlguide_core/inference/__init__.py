"""dlguide_core.inference."""
