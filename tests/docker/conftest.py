"""The image tests' fixtures: a real Docker engine, the base image and the built `cpu` target
(tests/support/docker.py)."""

from tests.support.docker import cpu_image, docker_base, docker_engine  # noqa: F401
