"""dlguide_core.torchvision_lib: torchvision without torch._dynamo (1.5 s of CPU and about 150 MB of RSS in every
server, CLI call and export), and nothing lost: torch.compile, roi_align and dynamo's own checks still work after.

Each check runs in a fresh interpreter: the point is what a process's first torchvision import does."""

import json
import os
import shutil
import subprocess
import sys

from dlguide_core.inference import backend_torch
from dlguide_core.torchvision_lib import PLAIN_IMPORT_ENV
from tests.support.paths import ROOT

FIRST_IMPORT = r"""
import json, sys
from dlguide_core.data.safe_folders import SafeImageFolder
from dlguide_core.inference.backend_torch import torch_compile_status
from dlguide_core.torchvision_lib import datasets, models, torchvision, transforms
from dlguide_core.vision.architectures import INCEPTION_V3
from dlguide_core.vision.presets import eval_transform

import torch

model = INCEPTION_V3.build().eval()
with torch.inference_mode():
    logits = model(eval_transform()(__import__("PIL.Image").Image.new("RGB", (320, 300))).unsqueeze(0))
seen = {"after_import": "torch._dynamo" in sys.modules, "logits": list(logits.shape),
        "weights": str(models.get_weight("Inception_V3_Weights.IMAGENET1K_V1")), "crop": transforms.CenterCrop(3).size,
        "image_folder": issubclass(SafeImageFolder, datasets.ImageFolder), "status": torch_compile_status()[0]}
seen["after_status"] = "torch._dynamo" in sys.modules
boxes = torchvision.ops.roi_align(torch.rand(1, 3, 8, 8), [torch.tensor([[0.0, 0.0, 4.0, 4.0]])], 2)
seen["roi_align"] = list(boxes.shape)
seen["compiled"] = torch.compile(lambda x: x * 2 + 1, backend="eager")(torch.ones(2)).tolist()
seen["dynamo_is_real"] = hasattr(sys.modules["torch._dynamo"], "optimize")
print(json.dumps(seen))
"""


def _run(code: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_first_import_leaves_dynamo_out_and_everything_that_needs_it_still_works():
    seen = _run(FIRST_IMPORT)
    assert seen["after_import"] is False and seen["after_status"] is False
    assert seen["weights"] == "Inception_V3_Weights.IMAGENET1K_V1" and seen["crop"] == [3, 3]
    assert seen["logits"] == [1, 1000] and seen["image_folder"] is True and seen["status"] is True
    assert seen["roi_align"] == [1, 3, 2, 2]  # its stand-in import loads the real dynamo on first call
    assert seen["compiled"] == [3.0, 3.0] and seen["dynamo_is_real"] is True


def test_the_plain_import_when_told():
    code = ("import json, sys; from dlguide_core.torchvision_lib import models; "
            "print(json.dumps({'dynamo': 'torch._dynamo' in sys.modules}))")
    assert _run(code, **{PLAIN_IMPORT_ENV: "1"}) == {"dynamo": True}


def test_where_dynamo_is_loaded_its_own_check_decides(monkeypatch):
    import torch._dynamo

    compiler = torch.cuda.is_available() or shutil.which(os.environ.get("CXX", "g++")) is not None
    assert backend_torch.torch_compile_status()[0] is compiler
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    assert backend_torch.torch_compile_status() == (False, "torch.compile is not supported on this Python/platform")
