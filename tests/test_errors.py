"""errors.error_summary / first_line: the one way a foreign exception becomes the line quoted in a message."""

from __future__ import annotations

from dlguide_core.errors import SUMMARY_CHARS, error_summary, first_line


def test_an_exception_is_its_first_line_without_a_cpp_location() -> None:
    exc = RuntimeError("\n  /src/AMDMIGraphX/src/program.cpp:512: compile: no kernel for fp8\nframe 1\nframe 2")
    assert error_summary(exc) == "no kernel for fp8"


def test_a_message_less_exception_is_its_type_and_every_line_is_capped() -> None:
    assert error_summary(KeyError()) == "KeyError"
    assert error_summary(ValueError("   \n  ")) == "ValueError"
    assert error_summary(OSError("x" * 1000)) == "x" * SUMMARY_CHARS
    assert first_line("") == "" and first_line("a\nb") == "a"
