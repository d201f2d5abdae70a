# The mpi backend under Syncline's shared suites, every rank an mpirun
# process (mpi_test_env.cc), and its own tests. Built only inside Syncline's
# tree (the suites and their harness live in tests/), at the end of the top
# level (included by ../CMakeLists.txt, so paths are spelled out). `ctest -L mpi`.
find_package(GTest REQUIRED)
include(GoogleTest)
set(_suites ${PROJECT_SOURCE_DIR}/tests/backends)
set(_here ${CMAKE_CURRENT_LIST_DIR})

# syncline_mpi_test(NAME n SOURCES ... [LIBS ...])
function(syncline_mpi_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES} ${_here}/mpi_test_env.cc)
  target_link_libraries(${T_NAME} PRIVATE syncline_test_common GTest::gtest_main
                        GTest::gmock syncline::core ${T_LIBS})
  target_compile_definitions(${T_NAME} PRIVATE SYNCLINE_TEST_BACKENDS_DEFAULT="mpi")
  add_dependencies(${T_NAME} syncline-backend-mpi)
endfunction()

# syncline_mpi_add(NAME test BINARY b FILTER gtest-filter [TIMEOUT s]): one
# ctest test for a filtered run, where a case must be left out (which
# gtest_discover_tests cannot do in CMake 3.25) or one binary runs again in
# another environment.
function(syncline_mpi_add)
  cmake_parse_arguments(T "" "NAME;BINARY;FILTER;TIMEOUT" "" ${ARGN})
  add_test(NAME ${T_NAME} COMMAND ${T_BINARY} --gtest_filter=${T_FILTER})
  set_tests_properties(${T_NAME} PROPERTIES LABELS mpi TIMEOUT ${T_TIMEOUT})
endfunction()

syncline_mpi_test(NAME collective_test_mpi
  SOURCES ${_suites}/collective_test.cc LIBS syncline_backend_test_util)
syncline_mpi_test(NAME backend_fault_test_mpi
  SOURCES ${_suites}/fault_test.cc ${_suites}/deadline_test.cc LIBS syncline_backend_test_util)

# The collective suite: every case on 1 to 4 ranks, each a ctest test
# (mpi.Backends/CollectiveTest.Allreduce/mpi_2ranks, ...).
gtest_discover_tests(collective_test_mpi
  TEST_PREFIX "mpi."
  DISCOVERY_TIMEOUT 60
  NO_PRETTY_VALUES TRUE
  PROPERTIES TIMEOUT 300 LABELS mpi)

# The same on 3 ranks with the check and trace interposers stacked on mpi
# (check's fingerprint exchanges are ops of their own on the communicator).
if(SYNCLINE_WITH_PLUGINS)
  syncline_mpi_add(NAME mpi.collective.3ranks.check_trace BINARY collective_test_mpi
    FILTER "*/mpi_3ranks" TIMEOUT 600)
  set_tests_properties(mpi.collective.3ranks.check_trace PROPERTIES
    ENVIRONMENT "SYNCLINE_PLUGINS=check,trace;SYNCLINE_TRACE_DIR=${CMAKE_CURRENT_BINARY_DIR}/mpi_trace")
endif()

# The fault and deadline suites, every case but one that cannot apply to
# MPI: RankKilledInALargeAllreduceFailsTheOthers expects the survivors to
# report the dead peer and exit 0, but a process of an MPI job that dies
# makes mpirun kill the whole job (OpenMPI has no fault tolerance in
# MPI_COMM_WORLD). mpi_job_test checks what happens instead: the job ends,
# in time, with mpirun naming the rank and its signal.
syncline_mpi_add(NAME mpi.fault BINARY backend_fault_test_mpi
  FILTER "-*RankKilledInALargeAllreduceFailsTheOthers*" TIMEOUT 900)

# Where MPI differs: timeouts abort a communicator, a killed rank ends the
# job, a rank that is not MPI's is refused (mpi_job_test.cc says what each
# case checks).
syncline_mpi_test(NAME mpi_job_test SOURCES ${_here}/mpi_job_test.cc)
gtest_discover_tests(mpi_job_test
  TEST_PREFIX "mpi."
  DISCOVERY_TIMEOUT 60
  PROPERTIES TIMEOUT 300 LABELS mpi)

# The trainer over mpi: it trains, and ends where the same run over gloo
# does (train_test.sh).
if(SYNCLINE_WITH_TORCH)
  add_test(NAME mpi.train COMMAND ${_here}/train_test.sh ${PROJECT_BINARY_DIR}/bin)
  set_tests_properties(mpi.train PROPERTIES LABELS mpi TIMEOUT 600)
endif()

# bench/interleaved.sh, 1 round at 8 B and 64 KiB: the measurement of
# issue 16's targets still builds, runs and checks its results (a wrong
# element fails it).
add_test(NAME mpi.bench.interleaved
  COMMAND ${_here}/../bench/interleaved.sh 1 allgather,broadcast,allreduce,reduce_scatter 8,65536)
set_tests_properties(mpi.bench.interleaved PROPERTIES LABELS mpi TIMEOUT 120
  ENVIRONMENT "BUILD=${PROJECT_BINARY_DIR}")

# backends/mpi built alone against the installed, moved package, then loaded
# with SYNCLINE_BACKEND=mpi on 2 mpirun ranks (install_check.sh, run by
# tests/install/install_test.sh).
add_test(NAME install.mpi
  COMMAND ${PROJECT_SOURCE_DIR}/tests/install/install_test.sh ${PROJECT_SOURCE_DIR}
          ${PROJECT_BINARY_DIR} ${_here}/install_check.sh)
set_tests_properties(install.mpi PROPERTIES TIMEOUT 300 LABELS "install;mpi")
