"""The Compiled page's words about the ONNX export (issue 31): a fresh export was reported as "reused from cache"
(the Prepare button exports first, then the cached backend reads the file back), and "cached by weights hash"
showed while it exported."""

from types import SimpleNamespace

from dlguide_core.inference import backend_base
from ui.compiled import export_note


def test_an_export_this_server_made_is_not_called_reused():
    assert export_note({"onnx": "m.onnx", "export_s": None, "export_made_s": 41.26}) == \
        " · ONNX export made in 41.3 s (cached since)"
    assert export_note({"onnx": "m.onnx", "export_s": 0.0, "export_made_s": None}) == " · ONNX export reused from cache"
    assert export_note({"onnx": None}) == ""


def test_the_progress_line_says_exporting_or_reusing_as_it_is(monkeypatch):
    said = []
    monkeypatch.setattr(backend_base, "export_onnx", lambda loaded: SimpleNamespace(path="m.onnx", export_s=0.0))
    from dlguide_core.inference.backend_onnxruntime import OnnxRuntimeBackend

    backend = OnnxRuntimeBackend.__new__(OnnxRuntimeBackend)  # Backend._export uses no state of its own
    for cached in (False, True):
        monkeypatch.setattr(backend_base, "export_cached", lambda loaded, cached=cached: cached)
        backend._export(None, lambda message, fraction: said.append(message))
    assert said[0].startswith("Exporting to ONNX (once per weights") and "cached by" not in said[0].split("(")[0]
    assert said[1] == "Reusing the ONNX export cached for these weights…"
