# backends/mpi/bench_rows.sh: the mpi backend's rows in the comparison,
# sourced by bench/compare/run.sh (which says what a row file may use: BIN,
# BUILD, PY, OPS, SIZES, MPIRUN, NAMES, CMD). Their systems, for the report,
# are in bench_systems.txt beside this file.
#
# Both rows run on the same mpirun and shared memory as mpi-shm:
#   mpi-shm-nb    mpi-shm's ops through MPI_Iallreduce & co. and MPI_Wait,
#                 the calls this backend makes: syncline-mpi / mpi-shm-nb is
#                 the backend's own cost, mpi-shm-nb / mpi-shm OpenMPI's
#                 libnbc against its blocking coll/tuned.
#   syncline-mpi  Syncline over this backend (rank 0 hosts the store).
# NBC_MCA goes to both of them, identically: libnbc's own choice for
# MPI_Iallreduce under 4 ranks is binomial (reduce to a root, then
# broadcast: twice the data of coll/tuned's blocking one); 1 is its ring
# (README.md, "Performance").
# shellcheck shell=bash disable=SC2034,SC2154  # NAMES, CMD (associative): run.sh's
[ -n "$MPIRUN" ] || return 0  # no OpenMPI: run.sh has said so
NBC_MCA="--mca coll_libnbc_iallreduce_algorithm 1"
NAMES+=(mpi_shm_nb)
CMD[mpi_shm_nb]="$MPIRUN --mca btl vader,self $NBC_MCA $BIN/syncline-bench-mpi --system=mpi-shm-nb --nonblocking ${SIZES[*]} --json="
if [ -f "$BUILD/lib/libsyncline-backend-mpi.so" ]; then
  NAMES+=(syncline_mpi)
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  CMD[syncline_mpi]="$MPIRUN --mca btl vader,self $NBC_MCA -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port $BIN/syncline-bench-collectives --backends=mpi --ops=$OPS ${SIZES[*]} --json="
fi
