"""The booth's Teach (issue 44): how fast a visitor's photos and "Learn" are, what a teaching visitor costs the others,
and how well a few photos teach.

In this process, as the served booth does it (dlguide_core.booth_teach.TeachStore on the booth's Predictor: every photo
a forward in the shared batching worker, the head trained in that worker between two batches), no HTTP:
- `teach_photo_ms` vs `classify_ms`: one visitor's photo to its features, and to its answer (p50, the worker alone);
- `learn_wall_ms` (the Learn request, wall time) and `train_ms` (the head's training in it) for NAMES x PHOTOS;
- `crowd`: 10 visitors (--quick: 2) classifying back to back, alone and beside one visitor who teaches NAMES x PHOTOS
  and learns over and over (alternating rounds, bench.common.alternate): the classifying visitors' throughput and its
  drop;
- `held_bytes_per_full_visitor`: what one visitor at the caps (10 names x 30 photos) holds in memory;
- `few_shot`: tiny-imagenet classes (--data, train photos to teach, val photos to test), 5 and 20 photos per class:
  the taught name ranked first among all classes (`joint_top1`) and among the taught names only (`taught_top1`).
  With the stand-in weights (random: tests.support.standin_weights, when the ImageNet file is absent) this says
  only that the head learns from whatever the features hold; with the real weights (cached in TORCH_HOME) it is
  the figure a visitor sees:

    .venv/bin/python -m bench.bench_booth_teach [--quick] [--backend torch|auto] [--data DIR] [--json out.json]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import alternate, parser, report, result
from tests.support.paths import SHARED_TINY
from tests.support.teach_photos import easy_jpeg

VISITOR = "bench_teacher_0123456789"
COLOURS = [(220, 30, 30), (30, 200, 40), (30, 40, 220), (220, 200, 30), (200, 30, 200)]


def predictor_for(loaded, backend: str):
    """The booth's Predictor on `backend` ("auto": what the booth picks here, booth.fastest_predictor)."""
    from dlguide_core import booth
    from dlguide_core.inference import registry

    if backend == "auto":
        return booth.fastest_predictor(loaded)
    prepared = registry.prepare_backend(backend, loaded)
    return booth.Predictor(booth.variant_label(prepared), booth.backend_device(prepared, loaded), prepared.run,
                           features=prepared.run_features)


def p50_ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 1)


def teach_all(store, loaded, predictor, names: int, photos: int, visitor: str = VISITOR) -> dict:
    """Forget, teach `names` x `photos` easy photos, Learn: the Learn answer."""
    store.forget(visitor, "bench")
    for n in range(names):
        for seed in range(photos):
            store.teach_photo(loaded, predictor, visitor, "bench", f"thing {n}", easy_jpeg(COLOURS[n % 5], seed))
    return store.learn(loaded, predictor, visitor, "bench")


def speed(store, loaded, predictor, names: int, photos: int, runs: int) -> dict:
    from dlguide_core import booth_photos

    photo = easy_jpeg(COLOURS[0], 99)
    store.references(loaded, predictor)  # the booth does this at a visitor's first photo (TeachStore.warm)
    classify = p50_ms(lambda: booth_photos.answer_photo(loaded, predictor, photo, "b.jpg"), runs)
    learned = [teach_all(store, loaded, predictor, names, photos) for _ in range(max(1, runs // 5))]
    teach = p50_ms(lambda: store.teach_photo(loaded, predictor, VISITOR, "bench", "thing 0", photo), runs)
    return {"classify_ms_p50": classify, "teach_photo_ms_p50": teach,
            "learn_wall_ms": [x["learn_ms"] for x in learned], "train_ms": [x["train_ms"] for x in learned],
            "learn_steps": learned[0]["steps"], "loss_first_last": [learned[0]["loss"][0], learned[0]["loss"][-1]]}


def crowd_round(store, loaded, predictor, seconds: float, teaching: bool, visitors: int, names: int,
                photos: int) -> float:
    """Classifications/s of `visitors` back-to-back classifying visitors over `seconds`, beside a teacher or not."""
    from dlguide_core import booth_photos

    stop, done = threading.Event(), [0] * visitors
    photo = easy_jpeg((90, 120, 160), 7)

    def classify(i: int) -> None:
        while not stop.is_set():
            booth_photos.answer_photo(loaded, predictor, photo, "c.jpg")
            done[i] += 1

    def teach() -> None:
        while not stop.is_set():
            teach_all(store, loaded, predictor, names, photos, visitor="bench_crowd_teacher_0123")

    threads = [threading.Thread(target=classify, args=(i,)) for i in range(visitors)]
    threads += [threading.Thread(target=teach)] if teaching else []
    for thread in threads:
        thread.start()
    time.sleep(seconds / 4)  # settle: the batches form
    start, counted = time.perf_counter(), sum(done)
    time.sleep(seconds)
    rate = (sum(done) - counted) / (time.perf_counter() - start)
    stop.set()
    for thread in threads:
        thread.join()
    return rate


def crowd(store, loaded, predictor, seconds: float, rounds: int, names: int, photos: int, visitors: int = 10
          ) -> dict:
    runs = alternate({"alone": lambda: crowd_round(store, loaded, predictor, seconds, False, visitors, names, photos),
                      "beside_a_teacher": lambda: crowd_round(store, loaded, predictor, seconds, True, visitors, names,
                                                              photos)}, rounds)
    alone, beside = statistics.median(runs["alone"]), statistics.median(runs["beside_a_teacher"])
    return {"visitors": visitors, "round_s": seconds, "rounds": rounds,
            "alone_per_s": [round(x, 2) for x in runs["alone"]],
            "beside_a_teacher_per_s": [round(x, 2) for x in runs["beside_a_teacher"]],
            "drop_pct": round(100 * (1 - beside / alone), 1) if alone else None}


def held_bytes_full_visitor(loaded) -> int:
    """One visitor at the caps (10 names x 30 photos), its rows as the booth keeps them (features and logits)."""
    import torch

    from dlguide_core import booth_teach
    from dlguide_core.inference.backend_base import head_layer

    dims = int(head_layer(loaded).in_features)
    state = booth_teach._Visitor("bench", 0.0)
    for n in range(10):
        state.features[f"n{n}"] = [torch.zeros(dims) for _ in range(30)]
        state.base[f"n{n}"] = [torch.zeros(len(loaded.class_names)) for _ in range(30)]
    return state.nbytes()


def tiny_split(data: Path, classes: int, train: int, val: int) -> tuple[dict[str, list[Path]], dict[str, list[Path]]]:
    """tiny-imagenet's first `classes` classes (wnids.txt order), named by words.txt: `train` train photos and
    `val` val photos of each (val_annotations.txt)."""
    words = dict(line.split("\t", 1) for line in (data / "words.txt").read_text().splitlines() if "\t" in line)
    wnids = (data / "wnids.txt").read_text().split()[:classes]
    names = {w: words.get(w, w).split(",")[0].strip() for w in wnids}
    taught = {names[w]: sorted((data / "train" / w / "images").glob("*.JPEG"))[:train] for w in wnids}
    tested: dict[str, list[Path]] = {names[w]: [] for w in wnids}
    for line in (data / "val" / "val_annotations.txt").read_text().splitlines():
        file, wnid = line.split("\t")[:2]
        if wnid in names and len(tested[names[wnid]]) < val:
            tested[names[wnid]].append(data / "val" / "images" / file)
    return taught, tested


def few_shot(loaded, data: Path, classes: int, shots: tuple[int, ...], val: int) -> dict:
    """Teach `classes` tiny-imagenet classes from each of `shots` photos per class; top-1 on `val` val photos each."""
    from dlguide_core import teach
    from dlguide_core.inference.backend_base import Outputs
    from dlguide_core.vision.images import load_image

    taught, tested = tiny_split(data, classes, max(shots), val)
    feats = {name: teach.features_of(loaded, [load_image(p) for p in paths]) for name, paths in taught.items()}
    test = {name: teach.features_of(loaded, [load_image(p) for p in paths]) for name, paths in tested.items()}
    refs = teach.references(loaded)
    rows = {}
    for k in shots:
        head = teach.fit_head({n: Outputs(o.logits[:k], o.features[:k]) for n, o in feats.items()}, refs)
        joint = right = total = 0
        for i, (name, out) in enumerate(test.items()):
            ranked = teach.rank(loaded.class_names, head, out.logits, out.features, k=1)
            joint += sum(top[0].taught and top[0].label == name for top in ranked)
            right += int((head.logits(out.features).argmax(1) == i).sum())
            total += len(out.features)
        rows[f"{k}_per_class"] = {"joint_top1": round(joint / total, 3), "taught_top1": round(right / total, 3),
                                  "train_ms": head.train_ms, "val_photos": total}
    return {"classes": list(taught), "chance": round(1 / len(taught), 3), **rows}


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--backend", default="torch", help="the booth's backend: torch (eager), onnxruntime, "
                         "... or auto (what the booth picks here; may export to ONNX first)")
    options.add_argument("--data", type=Path, default=SHARED_TINY, help="tiny-imagenet (few-shot; skipped if absent)")
    options.add_argument("--weights", default="imagenet", help="imagenet (the stand-in when its file is absent)")
    args = options.parse_args()
    quick = args.quick
    names, photos = (2, 3) if quick else (3, 10)

    from dlguide_core import booth_teach
    from dlguide_core.vision.models import load_model
    from tests.support.standin_weights import weights_env

    standin = weights_env(Path(tempfile.mkdtemp(prefix="bench_teach_"))) if args.weights == "imagenet" else {}
    os.environ.update(standin)  # the ImageNet file absent: the stand-in (random) weights in its place
    loaded = load_model(args.weights, device="cpu")
    weights = f"{loaded.label}{' (the stand-in: random weights)' if standin else ''}"
    store = booth_teach.TeachStore(idle_s=3600)
    predictor = predictor_for(loaded, args.backend)
    figures: dict[str, object] = {"weights": weights, "backend": predictor.backend, "names_x_photos": [names, photos]}
    figures["speed"] = speed(store, loaded, predictor, names, photos, 1 if quick else 10)
    figures["crowd"] = (crowd(store, loaded, predictor, 0.5, 1, names, photos, visitors=2) if quick
                        else crowd(store, loaded, predictor, 20.0, 4, names, photos))
    figures["held_bytes_per_full_visitor"] = held_bytes_full_visitor(loaded)
    if (args.data / "wnids.txt").is_file():
        figures["few_shot"] = few_shot(loaded, args.data, 2 if quick else 10, (3,) if quick else (5, 20),
                                       3 if quick else 50)
    else:
        figures["few_shot"] = f"skipped: no tiny-imagenet at {args.data}"
    report(result("bench_booth_teach", figures), args.json)


if __name__ == "__main__":
    main()
