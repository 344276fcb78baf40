"""Tests of the tf package (the TensorFlow recipes)."""
