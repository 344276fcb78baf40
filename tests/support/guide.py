"""The guide's own code, verbatim in spirit: the reference our classification is compared against."""

from __future__ import annotations

import torch
from PIL import Image
from torchvision import transforms


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
