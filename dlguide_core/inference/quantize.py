"""Static int8 quantisation of an ONNX export for ONNX Runtime's CPU provider, calibrated on real photos.

The int8 file is cached beside the fp32 export (same weights fingerprint, same dlguide metadata).
MIGraphX quantises inside its own compile (`migraphx_lib.quantize`), not here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from dlguide_core import onnxruntime_lib
from dlguide_core.inference.export import OnnxExport, cache_matches, write_checked
from dlguide_core.vision.presets import EvalPreset


def quantize_int8(export: OnnxExport, *, force: bool = False) -> Path:
    """A static int8 (QDQ, per-channel weights) copy of `export` for ONNX Runtime's CPU provider.

    Calibrated on the bundled sample photos (and their mirror images) through the model's own
    preset, so activation ranges come from real images, not noise. Cached beside the fp32 file,
    keyed by the same weights fingerprint. Agreement with fp32 is measured, never assumed:
    `bench` and the Compiled page report max |diff| and top-1/top-5 agreement for it."""
    import onnx

    quantization = onnxruntime_lib.load_quantization()
    reader: Any = quantization.CalibrationDataReader  # a class of a module typed as Any
    QuantFormat, QuantType = quantization.QuantFormat, quantization.QuantType

    source = Path(export.path)
    target = source.with_name(f"{source.stem}.int8.onnx")
    if target.is_file() and not force and cache_matches(target, export.fingerprint):
        return target
    batches = [{export.input_name: b.numpy()} for b in _calibration_batches(export.preset)]

    class _Samples(reader):
        def __init__(self) -> None:
            self._it = iter(batches)

        def get_next(self) -> dict | None:
            return next(self._it, None)

    with tempfile.TemporaryDirectory(dir=source.parent) as tmp:
        prepared, quantized = Path(tmp) / "prepared.onnx", Path(tmp) / "int8.onnx"
        quantization.shape_inference.quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantization.quantize_static(str(prepared), str(quantized), _Samples(), quant_format=QuantFormat.QDQ,
                                     activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
        proto = onnx.load(str(quantized))
        meta = {p.key: p.value for p in onnx.load(str(source), load_external_data=False).metadata_props}
        write_checked(proto, target, {**meta, "precision": "int8"})
    return target


def _calibration_batches(preset: EvalPreset) -> list[torch.Tensor]:
    from PIL import ImageOps

    from dlguide_core.vision.images import load_image
    from dlguide_core.vision.presets import preprocess
    from dlguide_core.vision.samples import bundled_samples

    photos = [load_image(p) for p in bundled_samples().values()]
    photos += [ImageOps.mirror(p) for p in photos]
    return [preprocess([p], preset) for p in photos]  # (1, 3, H, W) each
