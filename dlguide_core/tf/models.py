"""The guide's two Keras models: the Fashion-MNIST classifier, and the IMDB vectorizer, model and export.

Keras is imported inside each function, so this module loads without TensorFlow.
"""

from __future__ import annotations

from typing import Any

from dlguide_core.data.fashion_mnist import FASHION_CLASSES
from dlguide_core.tf.configs import FashionMnistConfig, TextClassificationConfig
from dlguide_core.tf.runtime import custom_standardization


def build_fashion_model(cfg: FashionMnistConfig) -> Any:
    import keras

    model = keras.Sequential([
        keras.Input(shape=(28, 28)),
        keras.layers.Flatten(),  # (B, 784)
        keras.layers.Dense(cfg.hidden_units, activation="relu"),
        keras.layers.Dense(len(FASHION_CLASSES)),  # logits
    ], name="fashion_mnist")
    model.compile(optimizer=keras.optimizers.Adam(cfg.lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def build_vectorizer(cfg: TextClassificationConfig, vocabulary: list[str] | None = None) -> Any:
    import keras

    layer = keras.layers.TextVectorization(max_tokens=cfg.max_tokens, standardize=custom_standardization,
                                           output_mode="int", output_sequence_length=cfg.sequence_length)
    if vocabulary is not None:
        layer.set_vocabulary(vocabulary)
    return layer


def build_text_model(cfg: TextClassificationConfig) -> Any:
    import keras

    model = keras.Sequential([
        keras.Input(shape=(cfg.sequence_length,), dtype="int64"),
        keras.layers.Embedding(cfg.max_tokens + 1, cfg.embedding_dim),  # (B, 250, 16)
        keras.layers.Dropout(cfg.dropout),
        keras.layers.GlobalAveragePooling1D(),  # (B, 16)
        keras.layers.Dropout(cfg.dropout),
        keras.layers.Dense(1),  # a logit: > 0 means positive
    ], name="imdb_sentiment")
    model.compile(optimizer=keras.optimizers.Adam(cfg.lr), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")])
    return model


def export_text_model(vectorizer: Any, model: Any) -> Any:
    """The guide's export: raw strings -> vectorizer -> trained model -> sigmoid."""
    import keras

    inputs = keras.Input(shape=(), dtype="string")
    outputs = keras.layers.Activation("sigmoid")(model(vectorizer(inputs)))
    export = keras.Model(inputs, outputs, name="imdb_sentiment_export")
    export.compile(loss=keras.losses.BinaryCrossentropy(from_logits=False), optimizer="adam",
                   metrics=[keras.metrics.BinaryAccuracy(name="accuracy")])
    return export
