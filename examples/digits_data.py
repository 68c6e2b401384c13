"""Save scikit-learn's handwritten digits (1,797 8×8 images, 10 classes; shipped with the
package, nothing is downloaded) in the .npz layout train.py reads: x N×8×8×1, y N class indices.

    python examples/digits_data.py digits.npz                          # all 1,797 images
    python examples/digits_data.py digits.npz --test digits-test.npz   # hold out the last 20%
    python examples/digits_data.py digits.npz --rows 200               # the first 200 (quick)
"""
from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits

TEST_FRACTION = 0.2


def save(path: str, x: np.ndarray, y: np.ndarray) -> None:
    """One .npz of images and labels, and a line saying what is in it."""
    np.savez(path, x=x, y=y)
    print(f"{path}: x {x.shape}, y {y.shape}, {len(np.unique(y))} classes")


def main() -> None:
    """Write the images, scaled from 0..16 to 0..1, and their labels."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the .npz file to train on")
    p.add_argument("--test", metavar="FILE", help=f"write the last {TEST_FRACTION:.0%}% of the "
                   "images here instead, for a held-out accuracy (bench/digits.py)")
    p.add_argument("--rows", type=int, help="keep only the first ROWS images")
    args = p.parse_args()
    digits = load_digits()
    x = (digits.images[..., None] / 16.0).astype(np.float32)  # N×8×8×1, one grey channel
    y = digits.target.astype(np.int64)
    x, y = x[:args.rows], y[:args.rows]
    if args.test:
        cut = len(x) - round(TEST_FRACTION * len(x))
        save(args.test, x[cut:], y[cut:])
        x, y = x[:cut], y[:cut]
    save(args.out, x, y)


if __name__ == "__main__":
    main()
