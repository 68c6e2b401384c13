"""One update and the loop of updates: the Trainer and its loop (loop.py), losses, row blocks,
optimizers and the mini-batch schedule."""
