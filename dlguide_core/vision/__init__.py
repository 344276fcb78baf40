"""Images and the models that look at them: decoding uploads safely, the one preprocessing per recipe, the models
and their weights and checkpoints, top-k classification, Grad-CAM, the bundled sample photos and result files.

It may import the base modules (settings, errors, devices, downloads) and nothing else of the core: the data,
inference, training and jobs packages build on it, never the other way round.
"""
