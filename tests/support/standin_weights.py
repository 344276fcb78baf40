"""Stand-in ImageNet weights for tests, benchmarks and the GPU scripts (never offered to users)."""

from __future__ import annotations

from pathlib import Path

import torch
from torchvision.models import inception_v3


def standin_imagenet_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """A random Inception v3 whose classifier is rescaled so its softmax has a real spread
    on photos (a bare random init saturates to one class). Stands in for the ImageNet
    weights where they cannot be downloaded (tests, benchmarks); never offered to users."""
    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess
    from dlguide_core.vision.samples import bundled_samples

    torch.manual_seed(seed)
    model = inception_v3(weights=None, aux_logits=True, init_weights=True, transform_input=True).eval()
    photos = [load_image(p) for p in bundled_samples().values()]
    features: list[torch.Tensor] = []
    hook = model.fc.register_forward_hook(lambda _m, inputs, _o: features.append(inputs[0]))
    with torch.no_grad():
        model(preprocess(photos))
        hook.remove()
        centred = features[0] - features[0].mean(dim=0, keepdim=True).mean()
        model.fc.weight.mul_(3.0 / (centred @ model.fc.weight.T).std())  # logits std ~3
        model.fc.bias.zero_()
    return model.state_dict()


def weights_env(workdir: Path) -> dict[str, str]:
    """The environment a served app or job needs for ImageNet weights offline: nothing when TORCH_HOME already
    holds them, else TORCH_HOME=workdir/torch_home holding the stand-in (written once; reused when already there)."""
    from dlguide_core.vision.models import imagenet_weights_path

    if imagenet_weights_path().is_file():
        return {}
    path = workdir / "torch_home" / "hub" / "checkpoints" / imagenet_weights_path().name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(standin_imagenet_state(), path)
    return {"TORCH_HOME": str(workdir / "torch_home")}
