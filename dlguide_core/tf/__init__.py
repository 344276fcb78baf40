"""TensorFlow: the guide's two TensorFlow case studies (Fashion-MNIST, IMDB reviews) as recipes of the store.

It owns the TensorFlow runtime (runtime: is TensorFlow installed, importing it once per process with its GPUs
pinned), the recipes' names and configs (configs), the Keras models (models), the Keras loop and .keras
checkpoints (loop), the two run functions (fashion_mnist, text) and a finished job's model (inference). It may
import the base modules, data and training's run contract (configs, sinks); never `jobs` nor `inference`.
`runtime` imports only the base modules, so `data` may use it to load keras.datasets. Named `tf`, not
`tensorflow`, so that nothing here shadows the real `tensorflow` import.
"""
