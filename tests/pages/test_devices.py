from tests.support.apptest import open_app


def test_devices_page_renders_report_and_checks():
    at = open_app("pages/devices.py")
    assert not at.exception
    assert at.title[0].value == "Devices"
    tables = {tuple(df.value.columns): df.value for df in at.dataframe}
    checks = tables[("check", "result", "detail")]
    assert list(checks["check"])[:2] == ["import torch", "GPU available"]
    assert at.subheader[0].value == "CPU only" or at.subheader[0].value.startswith(("ROCm", "CUDA"))
    runtimes = tables[("runtime", "available", "detail")]
    assert list(runtimes["runtime"]) == ["MIGraphX", "ONNX Runtime"]
    assert any("TensorFlow" in s.value for s in at.subheader)
