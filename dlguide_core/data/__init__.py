"""Datasets on disk: finding, checking, downloading and loading what the recipes train and evaluate on.

It owns ImageFolder datasets (image_folders: detect, validate, load through the recipe's preprocessing),
tiny-imagenet-200 and CIFAR-10 (tiny_imagenet, cifar10, with archives for checked downloads and safe
extraction), the TensorFlow case studies' data (fashion_mnist, imdb, local_copies), and the 1000 ImageNet
synset ids (imagenet_wnids.txt). It may import the base modules and `vision` (for the presets); never
`inference`, `training` or `jobs`. torchvision and TensorFlow are imported inside the functions that need them.
"""
