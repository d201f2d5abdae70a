# The smallest Syncline program: one allreduce, checked. Run it with
#   syncline-run -n 4 -- syncline-allreduce-example
add_executable(syncline-allreduce-example allreduce.cc)
target_link_libraries(syncline-allreduce-example PRIVATE
  syncline::core
  absl::flags absl::flags_parse absl::flags_usage absl::flags_config
  absl::str_format absl::status absl::statusor absl::time)
install(TARGETS syncline-allreduce-example RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# absl flags compares per-type template statics across libabsl_flags; hidden
# visibility would give this executable its own copies (see syncline_run.cmake).
set_target_properties(syncline-allreduce-example PROPERTIES
  CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
syncline_standard_cxx17(syncline-allreduce-example)
