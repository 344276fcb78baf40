"""The booth's words for visitors (issue 31): sample titles from SOURCES.md, not file names; an untrained model's
heat map claims nothing; a backend label a phone can wrap between words."""

import json
import re
import shutil
import subprocess

import pytest

from dlguide_core.vision.samples import bundled_samples, sample_title, sample_titles
from tests.support.paths import ROOT
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


def test_the_answer_takes_the_article_its_label_asks_for():
    """"I think it's an African crocodile", not "a African crocodile" (issue 43's walk): the booth screen's own
    `article` function (ui/booth_screen.js), run by Node as the browser runs it."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("no Node.js here (Debian's nodejs) to run the booth screen's script")
    source = (ROOT / "ui" / "booth_screen.js").read_text()
    found = re.search(r"^const article = .*$", source, re.MULTILINE)
    assert found, "ui/booth_screen.js declares no `article` function: the answer's article is fixed again"
    labels = ["African crocodile", "tabby", "Egyptian cat", "umbrella", "ox", "goldfish", "Indian elephant"]
    script = found[0] + f"\nconsole.log(JSON.stringify({json.dumps(labels)}.map(article)));"
    said = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(said) == ["an", "a", "an", "an", "an", "a", "an"]
    assert "I think it's ${article(top.label)} " in source  # the answer line uses it
