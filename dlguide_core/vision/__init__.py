"""dlguide_core.vision."""
