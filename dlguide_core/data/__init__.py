"""dlguide_core.data."""
