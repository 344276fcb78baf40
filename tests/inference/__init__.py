"""Tests of the inference package."""
