"""Stop and resume, all in one place: how a job stops at a checkpoint and goes on from one
(flow.py), the files (checkpoint.py), the signals (preempt.py)."""
