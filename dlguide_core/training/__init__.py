"""dlguide_core.training.loop."""
