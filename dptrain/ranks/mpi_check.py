"""Horovod's MPI against the launcher's: launched by another MPI, every rank would be rank 0
of 1 and train alone, P times over (or MPI_Init aborts with a page of MPI's internals); this
names both MPIs instead, in one line."""
from __future__ import annotations

import ctypes
import os
import re

OPEN_MPI = ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun")  # only Open MPI's launcher sets it
# What each launcher family puts in every rank's environment, with the rank count.
LAUNCHERS = (OPEN_MPI,
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


def _told(var: str) -> int:
    """The rank count a launcher put in var (0: none)."""
    value = os.environ.get(var, "")
    return int(value) if value.isdigit() else 0


def _report(var: str, launcher: str) -> str:
    lib = loaded_libmpi()
    built = f"{library_version(lib)} ({lib})" if lib else "no MPI library loaded"
    return (f"Horovod's MPI is {built}, but {launcher} started this job ({var}={_told(var)}): "
            "each rank would train alone as rank 0 of 1. Launch it with the mpirun of the MPI "
            "the set-up used (module load ...), or run 'make setup' again with this MPI first "
            "on PATH")


def before_init() -> str | None:
    """The mismatch that MPI_Init itself may not survive (MPICH under Open MPI's mpirun aborts
    in it), told before Horovod starts: Open MPI's launcher, another MPI's library."""
    var, launcher = OPEN_MPI
    if _told(var) <= 1:  # not Open MPI's launcher: nothing to read (every job starts here)
        return None
    lib = loaded_libmpi()
    if lib and not library_version(lib).startswith("Open MPI"):
        return _report(var, launcher)
    return None


def mismatch(size: int) -> str | None:
    """Why this job's ranks cannot see each other, given the size Horovod found, or None."""
    if size != 1:
        return None
    for var, launcher in LAUNCHERS:
        if _told(var) > 1:
            return _report(var, launcher)
    return None
