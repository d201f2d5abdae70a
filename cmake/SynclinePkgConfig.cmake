# pkg-config files: syncline-core.pc, and syncline-ddp.pc when the DDP layer
# is built. Both are relocatable: `prefix` is the path from the .pc file's
# own folder (${pcfiledir}) to the install prefix, so an installed tree that
# is moved or unpacked elsewhere still gives the right flags.
#
# Neither file adds -std=c++17 to Cflags: pkg-config flags usually come after
# the consumer's own, and a -std there would lower a C++20 program to C++17.
# The headers need C++17 or later (the default of GCC 11 and Clang 16 on);
# the README says so, and the CMake targets carry cxx_std_17.

# "../.." for lib/pkgconfig; also right for a multi-level libdir
# (lib/x86_64-linux-gnu/pkgconfig).
file(RELATIVE_PATH SYNCLINE_PC_PREFIX_FROM_PCDIR
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" SYNCLINE_PC_PREFIX_FROM_PCDIR "${SYNCLINE_PC_PREFIX_FROM_PCDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/syncline-core.pc.in
               ${CMAKE_BINARY_DIR}/syncline-core.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/syncline-core.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET syncline_ddp)
  # libtorch has no .pc file of its own: spell out what its CMake package
  # gives (Debian's libtorch-dev: /usr/include/torch/csrc/api/include,
  # -D_GLIBCXX_USE_CXX11_ABI=1, libtorch, libtorch_cpu and libc10 in the
  # multiarch lib folder).
  set(torch_cflags ${TORCH_CXX_FLAGS})
  foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
    list(APPEND torch_cflags "-I${dir}")
  endforeach()
  get_filename_component(torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
  set(torch_libs torch torch_cpu c10)
  foreach(lib torch_cuda c10_cuda)
    if(TARGET ${lib})
      list(APPEND torch_libs ${lib})
    endif()
  endforeach()
  # libtorch registers its operators from static initialisers: keep its
  # libraries even under --as-needed, as its CMake package does. One -Wl
  # token, because pkg-config drops a repeated -Wl,--pop-state (absl's .pc
  # files have one) and would unbalance a push/pop pair.
  list(TRANSFORM torch_libs PREPEND "-l")
  list(JOIN torch_libs "," torch_libs)
  set(SYNCLINE_PC_TORCH_LIBS
      "-L${torch_libdir} -Wl,--push-state,--no-as-needed,${torch_libs},--pop-state")
  list(JOIN torch_cflags " " SYNCLINE_PC_TORCH_CFLAGS)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/syncline-ddp.pc.in
                 ${CMAKE_BINARY_DIR}/syncline-ddp.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/syncline-ddp.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
