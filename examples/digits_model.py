"""Keras 3 models for train.py --model: each is FUNCTION(input_shape, n_outputs) -> keras.Model
whose outputs are one row of n_outputs logits (or values) per input row.

    python examples/digits_data.py digits.npz
    horovodrun -np 4 python train.py --data digits.npz --model examples/digits_model.py:cnn \
        --loss crossentropy --optimizer adam --lr 0.01 --batch-size 128 --epochs 10
"""
from __future__ import annotations

import keras


def cnn(input_shape: tuple[int, ...], n_outputs: int) -> keras.Model:
    """A small convolutional net: two 3×3 convolutions, a pooling, a dense layer, the logits."""
    return keras.Sequential([
        keras.Input(input_shape),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(n_outputs),
    ])


def dense(input_shape: tuple[int, ...], n_outputs: int) -> keras.Model:
    """A plain multilayer perceptron on the flattened input."""
    return keras.Sequential([
        keras.Input(input_shape),
        keras.layers.Flatten(),
        keras.layers.Dense(32, activation="tanh"),
        keras.layers.Dense(n_outputs),
    ])
