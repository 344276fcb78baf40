"""Tests of the vision package."""
