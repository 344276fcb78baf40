"""Teach (issue 44): the features beside the logits, the taught head and its calibration, and the booth's per-visitor
state (caps, LRU, idle drop, owners, nothing on disk)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dlguide_core import booth, booth_model, booth_teach, teach
from dlguide_core.inference.backend_base import Outputs, eager_outputs, sample_batch
from tests.support.teach_photos import EASY, easy_jpeg, easy_photo

VISITOR, OTHER = "visitor-0123456789abcdef", "visitor-fedcba9876543210"


def assert_refused(status: int, match: str, action: Callable[..., object], *args: object) -> None:
    """`action(*args)` is refused (TeachRefused) with `status`, in a line that says `match` (a regex)."""
    with pytest.raises(booth_teach.TeachRefused, match=match) as info:
        action(*args)
    assert info.value.status == status


@pytest.fixture(scope="module")
def inception():
    """The untrained Inception v3 (this machine has no ImageNet weights): its features still tell colours apart."""
    from dlguide_core.vision.models import load_model

    return load_model("none", device="cpu")


@pytest.fixture
def small(cifar):
    """A small model and a booth predictor whose worker gives both heads (eager), for the state's tests."""
    return cifar, booth.Predictor("eager", "CPU", lambda b: eager_outputs(cifar, b).logits,
                                  features=lambda b: eager_outputs(cifar, b))


def test_one_eager_forward_gives_the_logits_and_the_features_the_head_multiplies(inception) -> None:
    batch = sample_batch(inception, 2)
    out = eager_outputs(inception, batch)
    assert out.features.shape == (2, 2048) and out.logits.shape == (2, 1000)
    with torch.inference_mode():
        whole = inception.model(batch.contiguous(memory_format=torch.channels_last))
        assert torch.allclose(out.logits, whole, rtol=1e-4, atol=1e-6 * float(whole.abs().max()))
        assert torch.allclose(inception.model.fc(out.features), out.logits)


def test_three_easy_names_answer_14_of_15_unseen_photos_and_the_references_stay_unforced(inception) -> None:
    """The independent check's task with this machine's (untrained) weights: 3 names x 10 photos, 15 unseen."""
    photos = {name: [easy_photo(rgb, seed) for seed in range(10)] for name, rgb in EASY.items()}
    head = teach.teach_images(inception, photos)
    assert head.names == tuple(EASY) and head.counts == (10, 10, 10) and len(head.loss) == teach.STEPS
    assert head.loss[-1] < head.loss[0] / 4
    right = 0
    for name, rgb in EASY.items():
        out = teach.features_of(inception, [easy_photo(rgb, 100 + seed) for seed in range(5)])
        for top in teach.rank(inception.class_names, head, out.logits, out.features):
            right += top[0].label == name and top[0].taught
            assert all(not row.taught for row in top if row.index < 1000)
    assert right >= 14
    refs = teach.references(inception)  # ordinary objects: the model's own classes still win
    assert not any(top[0].taught for top in teach.rank(inception.class_names, head, refs.logits, refs.features))


def test_the_calibration_puts_the_boundary_halfway_between_taught_and_reference_margins() -> None:
    taught = torch.tensor([[5.0, 0.0], [0.0, 7.0]])
    shift = teach.calibrate(taught, torch.tensor([0, 1]), torch.tensor([1.0, 1.0]), torch.tensor([[2.0, 1.0]]),
                            torch.tensor([1.0]))
    assert float(shift) == pytest.approx(-(4.0 + 1.0) / 2)  # weakest taught margin 4, strongest reference 1
    overlapping = teach.calibrate(taught, torch.tensor([0, 1]), torch.tensor([1.0, 1.0]), torch.tensor([[9.0, 1.0]]),
                                  torch.tensor([1.0]))
    assert float(overlapping) == 0.0


@pytest.mark.parametrize(("raw", "why"), [("", "empty"), ("   ", "empty"), ("x" * 41, "too long"),
                                          ("<b>mug</b>", "markup"), ("mug\x07", "control"), ("a\nb", "control")])
def test_a_bad_name_is_one_line(raw: str, why: str) -> None:
    from dlguide_core.errors import UsageError

    with pytest.raises(UsageError, match=why) as info:
        teach.check_name(raw)
    assert "\n" not in str(info.value)


def test_names_are_trimmed_and_kept_as_typed() -> None:
    assert teach.check_name("  my  mug ") == "my mug"
    assert teach.check_name("Kaffeetasse ☕") == "Kaffeetasse ☕"


def test_learning_needs_two_names_with_three_photos_each() -> None:
    from dlguide_core.errors import UsageError

    with pytest.raises(UsageError, match="at least 2 names"):
        teach.check_enough({"mug": 5})
    with pytest.raises(UsageError, match="pen has 2 photos"):
        teach.check_enough({"mug": 5, "pen": 2})


def test_a_visitor_teaches_learns_and_classifies_and_another_never_sees_it(small, tmp_path: Path,
                                                                          monkeypatch) -> None:
    from dlguide_core import booth_photos

    loaded, predictor = small
    monkeypatch.setenv("DLGUIDE_HOME", str(tmp_path / "home"))
    before = set((tmp_path).rglob("*"))
    store = booth_teach.TeachStore()
    for name, rgb in EASY.items():
        for seed in range(3):
            answer = store.teach_photo(loaded, predictor, VISITOR, "screen-a", name, easy_jpeg(rgb, seed))
    assert answer == {"name": "sky blue", "examples": 3, "names": {n: 3 for n in EASY}}
    learned = store.learn(loaded, predictor, VISITOR, "screen-a")
    assert learned["names"] == list(EASY) and learned["examples"] == 9 and len(learned["loss"]) == teach.STEPS
    head = store.head(VISITOR, "screen-a")
    assert head is not None
    result = booth_photos.answer_photo(loaded, predictor, easy_jpeg(EASY["leaf green"], 50), "g.jpg", head=head)
    rows = booth_photos.answer_json(result, taught_flags=True)["top"]
    assert all("taught" in row for row in rows) and any(row["taught"] for row in rows)
    taught_row = next(row for row in rows if row["taught"])  # its Grad-CAM: the taught logit's, a JPEG
    from PIL import Image

    jpeg = booth_photos.heatmap_jpeg(loaded, predictor, easy_jpeg(EASY["leaf green"], 50), "g.jpg",
                                     int(taught_row["index"]), head)
    assert Image.open(io.BytesIO(jpeg)).format == "JPEG"
    with pytest.raises(booth_teach.UsageError):  # a taught index without that visitor's head: not a class
        booth_photos.heatmap_jpeg(loaded, predictor, b"", "g.jpg", int(taught_row["index"]))
    assert store.head(OTHER, "screen-b") is None  # another visitor: nothing
    with pytest.raises(booth_teach.TeachRefused) as info:  # the same id from another screen: refused
        store.head(VISITOR, "screen-b")
    assert info.value.status == 403
    store.forget(VISITOR, "screen-a")
    assert store.head(VISITOR, "screen-a") is None and store.visitors() == 0
    assert set(tmp_path.rglob("*")) == before  # nothing written: no photo, no file


def test_caps_names_photos_and_learn_refusals_are_one_line(small, monkeypatch) -> None:
    loaded, predictor = small
    monkeypatch.setenv("DLGUIDE_TEACH_MAX_NAMES", "2")
    monkeypatch.setenv("DLGUIDE_TEACH_MAX_PHOTOS", "3")
    store = booth_teach.TeachStore()
    photo = easy_jpeg((200, 10, 10), 1)
    for _ in range(3):
        store.teach_photo(loaded, predictor, VISITOR, "a", "mug", photo)
    assert_refused(409, "mug has 3 photos already", store.teach_photo, loaded, predictor, VISITOR, "a", "mug", photo)
    assert_refused(400, "at least 2 names", store.learn, loaded, predictor, VISITOR, "a")
    store.teach_photo(loaded, predictor, VISITOR, "a", "pen", photo)
    assert_refused(409, "2 names at most", store.teach_photo, loaded, predictor, VISITOR, "a", "cup", photo)
    assert_refused(400, "pen has 1 photo", store.learn, loaded, predictor, VISITOR, "a")
    from dlguide_core.errors import ImageError

    with pytest.raises(ImageError, match="not an image"):  # the route's 400
        store.teach_photo(loaded, predictor, VISITOR, "a", "pen", b"not an image")
    assert store.names(VISITOR) == {"mug": 3, "pen": 1}  # the bad photo took nothing


def test_the_default_caps_are_10_names_and_30_photos(monkeypatch) -> None:
    from dlguide_core import settings

    for var in ("DLGUIDE_TEACH_MAX_NAMES", "DLGUIDE_TEACH_MAX_PHOTOS"):
        monkeypatch.delenv(var, raising=False)
    assert (settings.teach_max_names(), settings.teach_max_photos()) == (10, 30)


def test_a_second_request_while_the_first_is_worked_on_is_429(small) -> None:
    loaded, predictor = small
    store = booth_teach.TeachStore()
    with store._working(VISITOR, "a", create=True), pytest.raises(booth_teach.TeachRefused) as info:
        store.teach_photo(loaded, predictor, VISITOR, "a", "mug", easy_jpeg((1, 2, 3), 0))
    assert info.value.status == 429


def test_least_recently_seen_visitors_go_first_past_the_cap(small, monkeypatch) -> None:
    loaded, predictor = small
    monkeypatch.setenv("DLGUIDE_TEACH_MAX_VISITORS", "2")
    store = booth_teach.TeachStore()
    ids = [f"visitor-{i:016d}" for i in range(3)]
    photo = easy_jpeg((10, 10, 200), 2)
    store.teach_photo(loaded, predictor, ids[0], "a", "mug", photo)
    store.teach_photo(loaded, predictor, ids[1], "a", "mug", photo)
    store.names(ids[0])
    store.head(ids[0], "a")  # seen again: now the most recent
    store.teach_photo(loaded, predictor, ids[2], "a", "mug", photo)
    assert store.visitors() == 2 and store.names(ids[1]) == {} and store.names(ids[0]) == {"mug": 1}


def test_the_memory_bound_drops_visitors_too(small, monkeypatch) -> None:
    loaded, predictor = small
    store = booth_teach.TeachStore()
    photo = easy_jpeg((10, 200, 10), 3)
    store.teach_photo(loaded, predictor, VISITOR, "a", "mug", photo)
    one = store.held_bytes()
    assert one > 0
    monkeypatch.setattr("dlguide_core.settings.teach_max_bytes", lambda: int(one * 1.5))
    store.teach_photo(loaded, predictor, OTHER, "a", "mug", photo)
    assert store.visitors() == 1 and store.names(OTHER) == {"mug": 1}


def test_a_visitor_unseen_for_twice_the_idle_time_is_dropped(small) -> None:
    loaded, predictor = small
    now = [1000.0]
    store = booth_teach.TeachStore(clock=lambda: now[0], idle_s=10)
    store.teach_photo(loaded, predictor, VISITOR, "a", "mug", easy_jpeg((1, 100, 1), 4))
    now[0] += 19
    assert store.sweep() == 0 and store.visitors() == 1
    now[0] += 2
    assert store.sweep() == 1 and store.visitors() == 0


@pytest.mark.parametrize("raw", [None, "", "short", "x" * 65, "bad id with spaces!!", "ünïcode-ünïcode-ü"])
def test_a_forged_visitor_id_is_400(raw) -> None:
    with pytest.raises(booth_teach.TeachRefused) as info:
        booth_teach.check_visitor(raw)
    assert info.value.status == 400


def test_the_taught_checkpoint_classifies_with_the_taught_names(inception, tmp_path: Path) -> None:
    from dlguide_core.vision.classify import predict_logits, top_k
    from dlguide_core.vision.models import load_model
    from dlguide_core.vision.presets import preprocess

    photos = {name: [easy_photo(rgb, seed) for seed in range(4)] for name, rgb in EASY.items()}
    head = teach.teach_images(inception, photos)
    path = teach.save_taught_checkpoint(inception, head, tmp_path / "taught.pt")
    taught = load_model(str(path), device="cpu")
    assert taught.class_names[-3:] == tuple(EASY) and len(taught.class_names) == 1003
    assert booth_model.booth_model(taught).taught_names == tuple(EASY)
    batch = preprocess([easy_photo(rgb, 77) for rgb in EASY.values()], taught.preset)
    tops = top_k(predict_logits(taught, batch), taught.class_names, 1)
    assert [t[0].label for t in tops] == list(EASY)


def test_kiosk_weights_pick_a_checkpoint_or_a_jobs_newest(tmp_path: Path, monkeypatch) -> None:
    from dlguide_core.errors import DlguideError

    monkeypatch.setenv("DLGUIDE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DLGUIDE_KIOSK_WEIGHTS", raising=False)
    assert booth_model.chosen_weights() is None
    ckpt = tmp_path / "m.pt"
    ckpt.write_bytes(b"x")
    monkeypatch.setenv("DLGUIDE_KIOSK_WEIGHTS", str(ckpt))
    assert booth.booth_weights() == str(ckpt.resolve())
    job = tmp_path / "home" / "jobs" / "job-1"
    job.mkdir(parents=True)
    monkeypatch.setenv("DLGUIDE_KIOSK_WEIGHTS", "job:job-1")
    with pytest.raises(DlguideError, match="has no checkpoint"):
        booth.booth_weights()
    (job / "checkpoint.pt").write_bytes(b"x")
    assert booth.booth_weights() == str(job / "checkpoint.pt")
    for bad in ("job:../etc", str(tmp_path / "missing.pt")):
        monkeypatch.setenv("DLGUIDE_KIOSK_WEIGHTS", bad)
        with pytest.raises(DlguideError):
            booth.booth_weights()


def test_the_head_trains_in_the_worker_between_batches(small) -> None:
    """Learn runs in the booth's worker thread (InferenceWorker.call), not in the request's."""
    loaded, predictor = small
    seen: list[str] = []
    real = teach.fit_head

    def spy(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    store = booth_teach.TeachStore()
    for name, rgb in list(EASY.items())[:2]:
        for seed in range(3):
            store.teach_photo(loaded, predictor, VISITOR, "a", name, easy_jpeg(rgb, seed))
    pytest.MonkeyPatch().setattr(teach, "fit_head", spy)
    try:
        store.learn(loaded, predictor, VISITOR, "a")
    finally:
        pytest.MonkeyPatch().undo()
    assert seen and all(name == "dlguide-booth" for name in seen)


def test_outputs_split_per_request_in_a_batch(small) -> None:
    loaded, predictor = small
    rows = sample_batch(loaded, 3)
    answer = predictor.worker.infer(rows)
    assert isinstance(answer.features, torch.Tensor) and answer.features.shape[0] == 3
    whole = eager_outputs(loaded, rows)
    assert torch.allclose(answer.features, whole.features) and isinstance(whole, Outputs)


def test_the_onnx_export_gives_the_features_as_a_second_output(cifar) -> None:
    """ONNX Runtime runs the export once for both heads (its second output: the pooled features), as eager does."""
    from dlguide_core.inference import registry

    backend = registry.prepare_backend("onnxruntime", cifar)
    rows = sample_batch(cifar, 3)
    both, eager = backend.run_features(rows), eager_outputs(cifar, rows)
    assert backend._features is not None, "the export has no features output"
    assert both.features.shape == eager.features.shape
    assert torch.allclose(both.features, eager.features, atol=1e-4 * float(eager.features.abs().max()) + 1e-6)
    assert torch.allclose(both.logits, backend.run(rows))


def test_the_cli_teaches_and_classify_answers_with_the_taught_name(tmp_path: Path, capsys) -> None:
    """`teach NAME=DIR ... --weights W --out FILE --json` writes a checkpoint; `classify --weights FILE` uses it."""
    import json

    from dlguide_core.cli.main import main

    pairs = []
    for name, rgb in EASY.items():
        folder = tmp_path / name.replace(" ", "_")
        folder.mkdir()
        for seed in range(4):
            (folder / f"{seed}.jpg").write_bytes(easy_jpeg(rgb, seed))
        pairs.append(f"{name}={folder}")
    out = tmp_path / "taught.pt"
    assert main(["teach", *pairs, "--weights", "none", "--out", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["out"] == str(out) and record["names"] == {n: 4 for n in EASY} and record["examples"] == 12
    assert len(record["loss"]) == teach.STEPS and out.is_file()
    unseen = tmp_path / "unseen.jpg"
    unseen.write_bytes(easy_jpeg(EASY["sky blue"], 99))
    assert main(["classify", str(unseen), "--weights", str(out), "--top", "3", "--json"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)
    assert answer["top"][0]["label"] == "sky blue" and answer["top"][0]["index"] == 1002


@pytest.mark.parametrize(("args", "why"), [(["mug"], "NAME=DIR"), (["mug={tmp}", "pen={tmp}"], "at least 3"),
                                           (["mug={tmp}"], "at least 2 names"), (["<b>={tmp}", "pen={tmp}"], "markup")])
def test_the_cli_refuses_bad_pairs_in_one_line_with_exit_2(tmp_path: Path, capsys, args, why) -> None:
    from dlguide_core.cli.main import main

    (tmp_path / "one.jpg").write_bytes(easy_jpeg((1, 2, 3), 0))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(["teach", *argv, "--weights", "none", "--out", str(tmp_path / "t.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and "\n" not in err and not (tmp_path / "t.pt").exists()


def test_the_booth_says_which_model_it_shows(tmp_path: Path, monkeypatch) -> None:
    shown = booth_model.BoothModel("/x/taught.pt", "checkpoint taught.pt", True, 1003, ("mug", "pen"))
    assert shown.describe() == ("Model: checkpoint taught.pt, 1003 classes (taught: mug, pen), chosen by this "
                                "booth's operator")
    monkeypatch.delenv("DLGUIDE_KIOSK_WEIGHTS", raising=False)
    assert booth_model.BoothModel("imagenet", "ImageNet", False, 1000, ()).describe() == "Model: ImageNet, 1000 classes"
