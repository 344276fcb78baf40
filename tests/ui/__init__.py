"""Tests of the shared Streamlit helpers (ui/)."""
