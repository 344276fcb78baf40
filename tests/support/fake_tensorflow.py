"""A stand-in for the GPU calls of `tf.config`, recording what the code asked for (no TensorFlow import).

For the device-pinning tests: a TensorFlow that sees the given GPUs, on a machine that has none.
"""

from __future__ import annotations

from typing import Any


class FakeTfConfig:
    """tf.config's GPU calls, recording the visible devices and memory-growth requests."""

    def __init__(self, gpus: list[str]) -> None:
        self.gpus, self.visible, self.growth = gpus, None, []
        self.experimental = type("Experimental", (), {"set_memory_growth": lambda _, g, on: self.growth.append(g)})()

    def list_physical_devices(self, kind: str) -> list[str]:
        return list(self.gpus)

    def set_visible_devices(self, devices: list[str], kind: str) -> None:
        self.visible = devices


def fake_tf(gpus: list[str]) -> Any:
    """An object with a `config` like TensorFlow's, seeing `gpus`."""
    return type("FakeTf", (), {"config": FakeTfConfig(gpus)})()
