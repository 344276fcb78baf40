"""Tests of the routed pages, through streamlit.testing's AppTest."""
