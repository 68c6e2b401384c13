"""The data: the user's files (files.py) and the one Source every mode reads, cut into each rank's
slice (source.py)."""
