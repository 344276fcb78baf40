"""Tests of the app served as `make run` / `make kiosk` serve it: real Chromium and websocket visitors."""
