import pytest
import torch
from PIL import Image
from torchvision import transforms

from dlguide_core.vision.classify import classify_images, classify_sources, top_k
from dlguide_core.vision.images import load_image
from dlguide_core.vision.models import imagenet_class_names, load_model


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


def guide_snippet(model, image_path):
    """The guide's own evaluation code: Compose + model + softmax + topk."""
    preprocess = transforms.Compose([
        transforms.Resize(299), transforms.CenterCrop(299), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    input_batch = preprocess(Image.open(image_path).convert("RGB")).unsqueeze(0)
    with torch.no_grad():
        output = model(input_batch)
    probabilities = torch.nn.functional.softmax(output[0], dim=0)
    top5_prob, top5_catid = torch.topk(probabilities, 5)
    return top5_catid.tolist(), top5_prob.tolist()


@pytest.mark.slow
def test_core_matches_the_guides_snippet(fake_imagenet, sample_jpeg):
    from torchvision.models import inception_v3

    loaded = load_model("imagenet", device="cpu")
    reference = inception_v3(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    reference.load_state_dict(torch.load(fake_imagenet, weights_only=True))
    reference.eval()
    ids, probs = guide_snippet(reference, sample_jpeg)
    (ours,) = classify_images(loaded, [load_image(sample_jpeg)], k=5)
    assert [p.index for p in ours] == ids
    assert max(abs(p.prob - q) for p, q in zip(ours, probs)) <= 1e-4
    assert ours[0].label == imagenet_class_names()[ids[0]]
    assert probs[0] < 0.99, "stand-in weights should give a real spread, not a saturated softmax"


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
