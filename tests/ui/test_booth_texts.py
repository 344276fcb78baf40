"""The booth's words for visitors (issue 31): sample titles from SOURCES.md, not file names; an untrained model's
heat map claims nothing; a backend label a phone can wrap between words."""

from dlguide_core.vision.samples import bundled_samples, sample_title, sample_titles
from ui.booth import heatmap_caption, readable_backend


def test_every_bundled_sample_has_a_persons_title():
    assert sample_titles() == {"chelsea": "Chelsea the cat", "coffee": "A coffee cup"}
    assert all(sample_title(name) != name for name in bundled_samples())


def test_an_untrained_models_heat_map_says_it_means_nothing_yet():
    assert heatmap_caption("tabby", trained=True) == "Grad-CAM for “tabby”: red is where it looked"
    untrained = heatmap_caption("tabby", trained=False)
    assert "untrained" in untrained and "means nothing yet" in untrained and "red is where it looked" not in untrained


def test_the_backend_label_has_no_provider_suffix_to_break_mid_word():
    assert readable_backend("ONNX Runtime int8 · CPUExecutionProvider") == "ONNX Runtime int8 · CPU"
    assert readable_backend("PyTorch (eager) · cpu") == "PyTorch (eager) · cpu"
