"""Test support: what several test modules share, and nothing that production code imports.

Paths of the project and of the optional `../shared` folder, free loopback ports, waiting with a deadline,
toy datasets and stand-in weights written on the fly, a served-app driver for AppTest, fakes of libraries
that cannot run here. Test modules import helpers only from here, never from each other.
"""
