"""Horovod's MPI against the launcher's: launched by another MPI, every rank would be rank 0
of 1 and train alone, P times over; this names both MPIs instead."""
from __future__ import annotations

import ctypes
import os
import re

# What each launcher family puts in every rank's environment, with the rank count.
LAUNCHERS = (("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"),
             ("PMI_SIZE", "a Hydra mpiexec (MPICH's or Intel MPI's) or srun --mpi=pmi2"))


def loaded_libmpi() -> str | None:
    """The path of the libmpi this process has loaded (Horovod's), if any."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.split()[-1]
            if re.search(r"/libmpi(ch)?\.so(\.\d+)*$", path):  # Debian's MPICH: libmpich
                return path
    return None


def library_version(path: str) -> str:
    """MPI_Get_library_version's first line, shortened ("Open MPI v4.1.4", "MPICH Version: 5.0.2")."""
    buf, n = ctypes.create_string_buffer(8192), ctypes.c_int()
    ctypes.CDLL(path).MPI_Get_library_version(buf, ctypes.byref(n))  # needs no MPI_Init
    first = buf.value.decode(errors="replace").strip().splitlines()[0]
    return " ".join(first.split(",")[0].split())


def mismatch(size: int) -> str | None:
    """Why this job's ranks cannot see each other, given the size Horovod found, or None."""
    if size != 1:
        return None
    for var, launcher in LAUNCHERS:
        told = os.environ.get(var, "")
        if told.isdigit() and int(told) > 1:
            lib = loaded_libmpi()
            built = f"{library_version(lib)} ({lib})" if lib else "no MPI library loaded"
            return (f"Horovod's MPI is {built}, but {launcher} started this job ({var}={told}): "
                    "each rank would train alone as rank 0 of 1. Launch it with the mpirun "
                    "of the MPI the set-up used (module load ...), or run 'make setup' again "
                    "with this MPI first on PATH")
    return None
