"""Save scikit-learn's handwritten digits (1,797 8×8 images, 10 classes; shipped with the
package, nothing is downloaded) in the .npz layout train.py reads: x N×8×8×1, y N class indices.

    python examples/digits_data.py digits.npz               # all 1,797 images
    python examples/digits_data.py digits.npz --rows 200    # the first 200 (a quick run)
"""
from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits


def main() -> None:
    """Write the images, scaled from 0..16 to 0..1, and their labels."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", help="the .npz file to write")
    p.add_argument("--rows", type=int, help="keep only the first ROWS images")
    args = p.parse_args()
    digits = load_digits()
    x = (digits.images[..., None] / 16.0).astype(np.float32)  # N×8×8×1, one grey channel
    y = digits.target.astype(np.int64)
    np.savez(args.out, x=x[:args.rows], y=y[:args.rows])
    print(f"{args.out}: x {x[:args.rows].shape}, y {y[:args.rows].shape}, "
          f"{len(np.unique(y[:args.rows]))} classes")


if __name__ == "__main__":
    main()
