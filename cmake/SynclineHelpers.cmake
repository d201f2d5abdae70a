# syncline_add_test(NAME name SOURCES a.cc b.cc [LIBS ...] [LABELS ...] [TIMEOUT s])
#
# One GoogleTest binary registered case by case with gtest_discover_tests.
include(GoogleTest)
function(syncline_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE syncline_test_common GTest::gtest_main GTest::gmock ${T_LIBS})
  # gtest_discover_tests splits a list-valued property into separate
  # arguments (only the first label survived), so several labels travel as
  # one, joined with '+': `ctest -L nccl` still selects "backends+nccl"
  # (-L is a regular expression).
  list(JOIN T_LABELS "+" labels)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    NO_PRETTY_VALUES TRUE
    # No ENVIRONMENT: plugins are found next to libsyncline in the build tree,
    # exactly as in an installed tree.
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${labels}")
endfunction()

# syncline_standard_cxx17(target)
#
# Makes a compiler extension or a later standard's feature (a C++20
# designated initializer, say) an error in `target`, for code that readers
# copy (the examples): it must stay valid C++17, as the project is.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-Werror=c++20-extensions SYNCLINE_HAVE_WERROR_CXX20_EXTENSIONS)
function(syncline_standard_cxx17 target)
  target_compile_options(${target} PRIVATE -Wpedantic -Werror=pedantic)
  if(SYNCLINE_HAVE_WERROR_CXX20_EXTENSIONS)
    # GCC 12 files designated initializers under this flag, not -Wpedantic's.
    target_compile_options(${target} PRIVATE -Werror=c++20-extensions)
  endif()
endfunction()
