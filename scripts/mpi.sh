# Which MPI a launcher or a library is. Sourced by scripts/setup.sh (what Horovod is built
# against) and launch.sh (which flags mpirun takes): the one place that tells them apart.
# An id is "FAMILY VERSION": openmpi 4.1.4, mpich 5.0.2, impi 2021.19.0, or "unknown ?".

mpi_id_of() {  # mpi_id_of TEXT: the id that a --version banner or MPI_Get_library_version names
    local text=$1 family after
    case "$text" in
        *"Open MPI"*) family=openmpi after=${text#*Open MPI} ;;
        *OpenRTE*) family=openmpi after=${text#*OpenRTE} ;;
        *"Intel(R) MPI"*) family=impi after=${text#*Intel(R) MPI} ;;
        # MPICH's library names itself; its mpiexec (Hydra), from 4.1 on, only itself.
        *MPICH*Version:*|*"HYDRA build details"*Version:*) family=mpich after=${text#*Version:} ;;
        *) echo "unknown ?"; return 0 ;;
    esac
    echo "$family $(grep -oE -m1 '[0-9]+(\.[0-9]+)+' <<<"$after" | head -n1)"
}

mpi_launcher_id() {  # mpi_launcher_id MPIRUN: the id of the MPI whose mpirun/mpiexec it is
    local out
    out=$("$1" --version 2>&1 </dev/null) || out=""
    mpi_id_of "$out"
}

mpi_name() {  # mpi_name ID: how a user calls it ("MPICH 5.0.2")
    local family=${1%% *} version=${1#* }
    case "$family" in
        openmpi) echo "Open MPI $version" ;;
        mpich) echo "MPICH $version" ;;
        impi) echo "Intel MPI $version" ;;
        *) echo "an unknown MPI" ;;
    esac
}

mpi_same() {  # mpi_same ID ID: one family, one major.minor (a library's 2021.19 is 2021.19.0)
    local a=$1 b=$2
    [ "${a%% *}" = "${b%% *}" ] && [ "${a%% *}" != unknown ] &&
        [ "$(cut -d. -f1,2 <<<"${a#* }")" = "$(cut -d. -f1,2 <<<"${b#* }")" ]
}
