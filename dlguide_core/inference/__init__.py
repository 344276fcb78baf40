"""Inference on a loaded vision model: ONNX export (`export`) and int8 quantisation (`quantize`), one module
per backend behind the interface of `backend_base` (`backend_torch`, `backend_onnxruntime`, `backend_migraphx`),
the backends by name (`registry`), which backend to use and what users may pick (`choice`), and the latency
and agreement benchmark (`benchmark`). It may import the base modules and `vision`; never `training`, `jobs`,
`data` or the UI. onnxruntime and migraphx are imported inside the functions that need them.
"""
