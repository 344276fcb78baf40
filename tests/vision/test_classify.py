import torch
from PIL import Image

from dlguide_core.vision.classify import classify_images, classify_sources, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import load_model


def test_top_k_is_sorted_with_probabilities_in_range():
    names = [f"c{i}" for i in range(20)]
    tops = top_k(torch.randn(4, 20) * 5, names, k=5)
    assert len(tops) == 4
    for row in tops:
        probs = [p.prob for p in row]
        assert len(row) == 5 and probs == sorted(probs, reverse=True)
        assert all(0.0 <= p <= 1.0 for p in probs)
        assert all(p.label == names[p.index] for p in row)


def test_top_k_clamps_k_to_the_class_count():
    assert len(top_k(torch.randn(1, 3), ["a", "b", "c"], k=10)[0]) == 3




def test_batched_equals_one_by_one(sample_jpeg):
    loaded = load_model("none", device="cpu")
    img = load_image(sample_jpeg)
    flipped = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    batched = classify_images(loaded, [img, flipped], k=3, batch_size=2)
    single = classify_images(loaded, [img], k=3) + classify_images(loaded, [flipped], k=3)
    for a, b in zip(batched, single):
        assert [p.index for p in a] == [p.index for p in b]
        assert all(abs(p.prob - q.prob) < 1e-4 for p, q in zip(a, b))


def test_bad_file_gets_its_own_error_and_the_others_still_classify(sample_jpeg):
    loaded = load_model("none", device="cpu")
    results = classify_sources(loaded, [("good.jpg", sample_jpeg.read_bytes()), ("bad.jpg", b"nope"),
                                        ("also_good.jpg", str(sample_jpeg))], k=5)
    assert [r.image for r in results] == ["good.jpg", "bad.jpg", "also_good.jpg"]
    assert results[1].error and not results[1].top
    assert len(results[0].top) == 5 and len(results[2].top) == 5
    assert results[0].to_json()["top"][0].keys() == {"label", "index", "prob"}
    assert results[1].to_json() == {"image": "bad.jpg", "error": results[1].error}


def test_sources_are_decoded_one_batch_at_a_time(cifar, sample_jpeg, monkeypatch):
    """--batch-size bounds the decoded images held at once (issue 18: every image was decoded first)."""
    from dlguide_core.vision import classify

    loaded = cifar  # a tiny CNN: the order of decodes and batches is what is tested
    events: list[str] = []
    real_load, real_classify = classify.load_image, classify.classify_images
    monkeypatch.setattr(classify, "load_image", lambda *a, **kw: events.append("decode") or real_load(*a, **kw))
    monkeypatch.setattr(classify, "classify_images",
                        lambda *a, **kw: events.append("classify") or real_classify(*a, **kw))
    results = classify_sources(loaded, [(f"{i}.jpg", str(sample_jpeg)) for i in range(5)], k=1, batch_size=2)
    assert [len(r.top) for r in results] == [1] * 5
    assert "".join(e[0] for e in events) == "ddcddcdc"
