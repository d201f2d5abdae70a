# SynclinePlugin.cmake: syncline_add_plugin(), the one way to define a
# Syncline plugin target, in Syncline's own tree and outside it.
#
# find_package(Syncline) includes this file; so does Syncline's top-level
# CMakeLists.txt. Every in-tree backend and interposer is defined with it.
#
# Example (a backend outside Syncline's tree):
#   find_package(Syncline CONFIG REQUIRED)
#   syncline_add_plugin(NAME mybackend BACKEND
#     SOURCES plugin.cc communicator.cc work.cc
#     LIBS MyTransport::MyTransport)
#   # -> libsyncline-backend-mybackend.so, installed to <libdir>/syncline
include_guard(GLOBAL)
include(GNUInstallDirs)

# syncline_add_plugin(NAME <name> [BACKEND | INTERPOSER]
#                     SOURCES <source>... [LIBS <library>...]
#                     [INSTALL_RPATH <dir>...] [OUTPUT_DIRECTORY <dir>]
#                     [NO_INSTALL])
#
# A MODULE library that the core's loader can open:
#   BACKEND (the default)  target syncline-backend-<name>,
#                          file libsyncline-backend-<name>.so, exporting
#                          syncline_backend_plugin_v2 only;
#   INTERPOSER             target syncline-plugin-<name>,
#                          file libsyncline-plugin-<name>.so, exporting
#                          syncline_interposer_plugin_v2 only.
# Everything else is hidden (hidden visibility, inline functions included,
# and a version script), so the plugin's C++ internals and the templates it
# instantiates cannot interpose on the host's or another plugin's. The
# plugin links syncline::plugin_sdk (and so the C ABI) plus LIBS, compiles
# with -Wall -Wextra, may leave no symbol undefined (--no-undefined), and is
# installed to ${SYNCLINE_PLUGIN_INSTALL_DIR} (default <libdir>/syncline)
# unless NO_INSTALL. INSTALL_RPATH folders are appended to the RPATH (for a
# transport library that is not on the loader's path, e.g. libnccl.so.2).
# OUTPUT_DIRECTORY places the built file elsewhere than the project's
# library output folder (for a test copy the loader must not find).
function(syncline_add_plugin)
  cmake_parse_arguments(P "BACKEND;INTERPOSER;NO_INSTALL" "NAME;OUTPUT_DIRECTORY"
                        "SOURCES;LIBS;INSTALL_RPATH" ${ARGN})
  if(NOT P_NAME OR NOT P_SOURCES)
    message(FATAL_ERROR "syncline_add_plugin: NAME and SOURCES are required")
  endif()
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "syncline_add_plugin(${P_NAME}): unknown arguments ${P_UNPARSED_ARGUMENTS}")
  endif()
  if(P_BACKEND AND P_INTERPOSER)
    message(FATAL_ERROR "syncline_add_plugin(${P_NAME}): BACKEND or INTERPOSER, not both")
  endif()
  if(P_INTERPOSER)
    set(target syncline-plugin-${P_NAME})
    set(exports ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/syncline_interposer.map)
  else()
    set(target syncline-backend-${P_NAME})
    set(exports ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/syncline_backend.map)
  endif()
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${exports})
  if(P_INSTALL_RPATH)
    set(rpath ${CMAKE_INSTALL_RPATH} ${P_INSTALL_RPATH})
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "${rpath}")
  endif()
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  endif()
  target_link_libraries(${target} PRIVATE syncline::plugin_sdk ${P_LIBS})
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${exports}"
    "LINKER:--no-undefined")
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(NOT P_NO_INSTALL)
    if(DEFINED SYNCLINE_PLUGIN_INSTALL_DIR)
      set(destination ${SYNCLINE_PLUGIN_INSTALL_DIR})
    else()
      set(destination ${CMAKE_INSTALL_LIBDIR}/syncline)
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${destination})
  endif()
endfunction()
