"""dptrain: synchronous data-parallel training of a small network with Horovod and MPI."""
