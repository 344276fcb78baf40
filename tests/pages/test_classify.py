"""AppTest of the Classify page (through app.py's navigation, as a user reaches it)."""

import pytest

from tests.support.apptest import open_app
from tests.support.guide import guide_snippet


def test_missing_imagenet_weights_explain_and_offer_download(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    at = open_app()
    assert not at.exception
    assert any("inception_v3_google-0cc3c7bd.pth" in w.value for w in at.warning)
    assert at.button(key="classify_download_weights")
    at.button(key="classify_download_weights").click().run()
    assert any("could not be downloaded" in e.value for e in at.error)  # offline: a message, no traceback
    assert not at.get("progress")  # issue 31: no "Downloading…" bar left standing over the failure
    assert not at.exception


def test_resnet50_imagenet_is_offered_and_fetched_like_inceptions(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    at = open_app()
    picker = at.selectbox(key="classify_weights")
    assert picker.options[:3] == ["ImageNet (pretrained)", "none (untrained, random init)",
                                  "ResNet-50, ImageNet (IMAGENET1K_V2)"]  # the labels the picker shows
    picker.set_value("resnet50:imagenet").run()
    assert any("resnet50-11ad3fa6.pth" in w.value for w in at.warning)
    at.button(key="classify_download_weights").click().run()
    assert any("resnet50-11ad3fa6.pth" in e.value and "could not be downloaded" in e.value for e in at.error)
    assert not at.exception


def test_upload_shows_five_rows_and_untrained_banner(sample_jpeg):
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.file_uploader(key="classify_upload").set_value(("cat.jpg", sample_jpeg.read_bytes(), "image/jpeg")).run()
    assert not at.exception
    assert any("untrained" in w.value for w in at.warning)
    (table,) = at.dataframe
    assert len(table.value) == 5 and list(table.value["rank"]) == [1, 2, 3, 4, 5]


def test_each_result_says_its_backend_precision_and_latency_and_the_help_what_was_measured(sample_jpeg):
    from dlguide_core.inference.registry import backend_status

    title = {s.name: s.title for s in backend_status()}["torch"]
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.file_uploader(key="classify_upload").set_value(("cat.jpg", sample_jpeg.read_bytes(), "image/jpeg")).run()
    assert not at.exception
    (caption,) = [c.value for c in at.caption if c.value.startswith(f"{title} · fp32 · ")]
    assert caption.endswith(" ms per image") and float(caption.split(" · ")[2].split()[0]) > 0
    at.run()  # the backend help now says what this machine measured: this very run
    help_text = at.selectbox(key="classify_backend").help
    assert help_text.startswith("Measured on this machine") and f"{title} fp32" in help_text


def test_a_bad_file_gets_its_own_error_and_the_others_still_show(sample_jpeg):
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.file_uploader(key="classify_upload").set_value([
        ("good.jpg", sample_jpeg.read_bytes(), "image/jpeg"),
        ("evil.png", b"\x89PNG\r\n\x1a\n garbage", "image/png"),
        ("good2.jpg", sample_jpeg.read_bytes(), "image/jpeg"),
    ]).run()
    assert not at.exception
    assert len(at.dataframe) == 2
    assert len(at.error) == 1 and "evil.png" in at.error[0].value


def test_bundled_sample_classifies():
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.selectbox(key="classify_sample").set_value("chelsea").run()
    assert not at.exception and len(at.dataframe) == 1


@pytest.mark.slow
def test_page_matches_the_guides_snippet(fake_imagenet, sample_jpeg):
    import torch
    from torchvision.models import inception_v3

    at = open_app()
    assert at.selectbox(key="classify_weights").value == "imagenet"
    at.file_uploader(key="classify_upload").set_value(("cat.jpg", sample_jpeg.read_bytes(), "image/jpeg")).run()
    assert not at.exception and not at.warning
    table = at.dataframe[0].value
    reference = inception_v3(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    reference.load_state_dict(torch.load(fake_imagenet, weights_only=True))
    ids, probs = guide_snippet(reference.eval(), sample_jpeg)
    assert list(table["index"]) == ids
    # the table rounds to 4 decimals for display
    assert max(abs(a - b) for a, b in zip(table["probability"], probs)) <= 1e-4 + 5e-5


def test_an_upload_classifies_at_most_the_limit_and_says_so(sample_jpeg):
    """Issue 18: a limit on files per upload bounds what one visitor makes the server decode."""
    from dlguide_core.vision.images import MAX_FILES_PER_UPLOAD

    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    files = [(f"cat{i}.jpg", sample_jpeg.read_bytes(), "image/jpeg") for i in range(MAX_FILES_PER_UPLOAD + 2)]
    at.file_uploader(key="classify_upload").set_value(files).run()
    assert not at.exception
    assert len(at.dataframe) == MAX_FILES_PER_UPLOAD
    assert any(f"only the first {MAX_FILES_PER_UPLOAD}" in w.value for w in at.warning)


def test_a_broken_job_checkpoint_is_one_clear_error(isolated_home, sample_jpeg):
    """Issue 18: a checkpoint whose head does not match its class names showed a generic error box."""
    from dlguide_core.vision.checkpoints import save_checkpoint
    from dlguide_core.vision.presets import CIFAR_EVAL
    from dlguide_core.vision.small_cnn import CifarNet

    path = isolated_home / "jobs" / "broken" / "checkpoint.pt"
    save_checkpoint(path, {"arch": "cifar_net", "arch_kwargs": {"num_classes": 10}, "class_names": ["a", "b"],
                           "preset": CIFAR_EVAL.to_dict(), "model": CifarNet().state_dict()})
    at = open_app()
    at.selectbox(key="classify_weights").set_value(str(path)).run()
    assert not at.exception
    (error,) = at.error
    assert "checkpoint.pt: the model has 10 outputs but the file names 2 classes" in error.value
    assert "\n" not in error.value


def test_a_rerun_with_the_same_input_reuses_the_result_downloads_included(sample_jpeg, monkeypatch):
    """Issue 31: each Download click (a rerun) classified again: the file's latency_ms was not the screen's, and
    the click held the forward slot again. The result is kept per input (images, weights, backend, top-k)."""
    from dlguide_core.vision import result_files

    calls = []
    real = result_files.classify_timed
    monkeypatch.setattr(result_files, "classify_timed", lambda *a, **k: calls.append(1) or real(*a, **k))
    at = open_app()
    at.selectbox(key="classify_weights").set_value("none").run()
    at.file_uploader(key="classify_upload").set_value(("cat.jpg", sample_jpeg.read_bytes(), "image/jpeg")).run()
    shown = [c.value for c in at.caption if " ms per image" in c.value]
    assert len(calls) == 1 and shown
    at.run()  # what a click on "Download results (CSV…)" does: a rerun with the same input
    assert len(calls) == 1 and [c.value for c in at.caption if " ms per image" in c.value] == shown
    at.slider(key="classify_topk").set_value(3).run()  # a different input: classified again
    assert len(calls) == 2 and len(at.dataframe[0].value) == 3
