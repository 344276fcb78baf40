"""AppTest of the Classify page's Teach flow (issue 44): names and photos, "Learn" (the loss curve and its one line),
a photo answered with its taught name, "Save as checkpoint" (a file under DLGUIDE_HOME, then one of the weights the
page offers, which classifies with the taught name), and one line for what a user gets wrong.

The untrained model ("none") keeps the forwards short; its random features still tell flat colours apart."""

from __future__ import annotations

from pathlib import Path

from tests.support.apptest import open_app
from tests.support.charts import plotly_charts
from tests.support.teach_photos import thing_jpeg

COLOURS = {"red mug": (210, 30, 40), "blue pen": (40, 70, 210)}
KEY = "classify_teach"


def files(name: str, count: int, first_seed: int = 0) -> list[tuple[str, bytes, str]]:
    colour = COLOURS.get(name, (200, 120, 30))
    return [(f"photo_{first_seed + i}.jpg", thing_jpeg(colour, first_seed + i), "image/jpeg") for i in range(count)]


def taught_page(names: dict[str, int]):
    at = open_app(timeout=600)
    at.selectbox(key="classify_weights").set_value("none").run()
    for i, (name, count) in enumerate(names.items()):
        at.text_input(key=f"{KEY}_name_{i}").set_value(name)
        at.file_uploader(key=f"{KEY}_photos_{i}").set_value(files(name, count))
    return at.run()


def test_teach_learn_try_save_and_pick_the_checkpoint(isolated_home: Path) -> None:
    at = taught_page({"red mug": 4, "blue pen": 4})
    assert not at.exception
    at.button(key=f"{KEY}_learn").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    line = next(s.value for s in at.success if "stayed frozen" in s.value)
    assert "8 photos of 2 names" in line and " ms on CPU" in line, line
    (curve,) = [spec for spec in plotly_charts(at).values() if spec["layout"]["xaxis"]["title"]["text"] == "step"]
    assert [trace["type"] for trace in curve["data"]] == ["scatter"]  # SVG, not WebGL
    losses = curve["data"][0]["y"]
    assert len(losses) >= 10 and losses[-1] < losses[0], losses  # one point per step, and it learned

    at.file_uploader(key=f"{KEY}_try").set_value([("unseen.jpg", thing_jpeg(COLOURS["blue pen"], 99), "image/jpeg")])
    at.run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert table["label"].iloc[0] == "blue pen" and table["taught"].iloc[0] == "taught just now", table

    at.button(key=f"{KEY}_save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    saved = list((isolated_home / "taught").glob("*.pt"))
    assert len(saved) == 1
    assert at.get("download_button")
    picker = at.selectbox(key="classify_weights")  # selectable as weights, named as the Teach flow's
    assert f"taught on this page: {saved[0].name}" in picker.options
    at.selectbox(key="classify_weights").set_value(str(saved[0])).run()
    at.file_uploader(key="classify_upload").set_value(("unseen.jpg", thing_jpeg(COLOURS["blue pen"], 99),
                                                      "image/jpeg")).run()
    assert not at.exception
    assert at.dataframe[-1].value["label"].iloc[0] == "blue pen"


def test_what_a_user_gets_wrong_is_one_line_and_nothing_is_lost(isolated_home: Path) -> None:
    at = taught_page({"<b>red</b>": 3, "blue pen": 3})
    at.button(key=f"{KEY}_learn").click().run()
    assert not at.exception
    (error,) = [e.value for e in at.error]
    assert error.startswith("Could not learn: name 1:") and "markup" in error and "\n" not in error
    assert at.text_input(key=f"{KEY}_name_0").value == "<b>red</b>"  # the form keeps what was typed

    at.text_input(key=f"{KEY}_name_0").set_value("red mug")
    at.file_uploader(key=f"{KEY}_photos_0").set_value(files("red mug", 2))
    at.run()
    at.button(key=f"{KEY}_learn").click().run()
    (error,) = [e.value for e in at.error]
    assert "red mug has 2 photos" in error and "at least 3" in error
    at.text_input(key=f"{KEY}_name_0").set_value("Blue Pen").run()
    at.file_uploader(key=f"{KEY}_photos_0").set_value(files("red mug", 3)).run()
    at.button(key=f"{KEY}_learn").click().run()
    (error,) = [e.value for e in at.error]
    assert "named twice" in error
    assert not (isolated_home / "taught").exists()  # nothing saved
