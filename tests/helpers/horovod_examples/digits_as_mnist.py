"""Write an .npz in MNIST's format (x_train, y_train, x_test, y_test; uint8 images 0-255, labels
0-9) from scikit-learn's handwritten digits, which ship on disk: Horovod's MNIST examples train
on it where MNIST cannot be downloaded.   python digits_as_mnist.py OUT.npz [SIZE]
The images keep the digits' own 8x8 unless SIZE (28: MNIST's) is given: the examples' networks
take their input shape from the data, and a 28x28 step costs some 12 times an 8x8 one.
"""
from __future__ import annotations

import sys

import numpy as np
from sklearn.datasets import load_digits


def mnist_like(size: int = 8) -> dict[str, np.ndarray]:
    """The 1797 8x8 digits (0-16) as size x size images (0-255): pixels repeated, then a border."""
    digits = load_digits()
    scale = size // 8
    images = np.kron(digits.images, np.ones((scale, scale)))
    border = (size - 8 * scale) // 2
    images = np.pad(images, ((0, 0), (border, size - 8 * scale - border),
                             (border, size - 8 * scale - border)))
    images = np.round(images * 255 / 16).astype(np.uint8)
    labels = digits.target.astype(np.uint8)
    n_train = 1500
    return {"x_train": images[:n_train], "y_train": labels[:n_train],
            "x_test": images[n_train:], "y_test": labels[n_train:]}


if __name__ == "__main__":
    np.savez(sys.argv[1], **mnist_like(*map(int, sys.argv[2:3])))
