"""Ranks and launchers: what the launcher announced (launcher.py), settings before MPI starts
(runtime.py), Horovod's start and the start-up collectives (distributed.py), MPI checks and
silent hosts."""
