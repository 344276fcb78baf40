"""ui/backends.py: the Devices page's words for MIGraphX targets and ONNX Runtime providers (issue 24)."""

from __future__ import annotations


def test_devices_words_a_missing_gpu_target_and_lists_the_providers_the_compiled_page_uses() -> None:
    from ui.backends import ort_providers_text, plain_target_error

    raw = ("MIGraphX has no gpu target here: /src/AMDMIGraphX/src/dynamic_loader.cpp:48: check_load_error: Dynamic "
           "loading or symbol lookup failed with libmigraphx_gpu.so: cannot open shared object file")
    assert plain_target_error("gpu", raw).startswith("not on this machine: the gpu target needs an AMD GPU")
    assert ort_providers_text(("AzureExecutionProvider", "CPUExecutionProvider")) == (
        "CPUExecutionProvider (also in this build, not used here: AzureExecutionProvider)")
