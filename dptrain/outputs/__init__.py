"""What rank 0 writes: console, metrics, TensorBoard, config.json, weights (report.py) and the
figure (plot.py)."""
