# install_check.sh: the install test's check of this backend
# (tests/install/install_test.sh <src> <build> <this file>, ctest
# install.mpi), sourced there once the package is installed and moved.
# backends/mpi is built alone, as a third party would, from its folder with
# find_package(Syncline) (the moved tree) and find_package(MPI) only; the
# downstream program loads it with SYNCLINE_BACKEND=mpi on 2 mpirun ranks
# and checks its allreduce.
# shellcheck shell=bash disable=SC2154  # work, expected_path: install_test.sh's
build_plugin_alone backends/mpi backend-mpi syncline_backend_plugin_v2
build_downstream
# Rank 0 hosts the rendezvous store (ranks from OMPI_COMM_WORLD_*) on a
# free loopback port; MPI's own traffic stays on shared memory and lo.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun --oversubscribe -np 2 --mca btl self,vader --mca oob_tcp_if_include lo \
        -x SYNCLINE_PLUGIN_PATH="$work/backend-mpi" -x SYNCLINE_BACKEND=mpi \
        -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" "$work/build/downstream" 2>&1) || {
  echo "$out"; echo "FAILED: downstream over the standalone mpi backend under mpirun"; exit 1; }
echo "$out"
for rank in 0 1; do
  grep -qxF "downstream rank $rank/2 over mpi: OK; plugin search path $work/backend-mpi:$expected_path" \
    <<< "$out" || { echo "FAILED: rank $rank did not reduce over the standalone mpi backend"; exit 1; }
done
