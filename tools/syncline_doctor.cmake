# syncline-doctor: backends, library versions, interfaces, environment, and a
# self-test under syncline-run.
add_executable(syncline-doctor syncline_doctor/main.cc syncline_doctor/isolated.cc
  syncline_doctor/probes.cc)
target_link_libraries(syncline-doctor PRIVATE syncline::core syncline_cli ${CMAKE_DL_LIBS}
  absl::flags absl::flags_parse absl::flags_usage absl::str_format absl::strings absl::time)
# absl flags needs default visibility in executables (see syncline_run.cmake).
set_target_properties(syncline-doctor PROPERTIES
  CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
install(TARGETS syncline-doctor RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
