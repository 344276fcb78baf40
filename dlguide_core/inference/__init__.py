"""Inference on a loaded vision model: ONNX export (`export`) and int8 quantisation (`quantize`), one module
per backend behind the interface of `backend_base` (`backend_<name>`: torch, onnxruntime, migraphx, ...), each
backend declared once in `specs` (name, label, ranking; torch-free, for the CLI) and found by name in
`registry`, which backend to use and what users may pick (`choice`), and the latency and agreement benchmark
(`benchmark`). It may import the base modules and `vision`; never `training`, `jobs`, `data` or the UI. A
backend's own runtime (onnxruntime, migraphx, ...) is imported inside the functions that need it.
"""
