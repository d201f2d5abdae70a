# syncline-run: the launcher (see tools/syncline_run/launcher.h).
add_executable(syncline-run
  syncline_run/main.cc
  syncline_run/launcher.cc
  syncline_run/generation.cc
  syncline_run/node_group.cc
  syncline_run/node_check_in.cc
  syncline_run/worker.cc
  syncline_run/worker_env.cc
  syncline_run/output.cc
  syncline_run/summary.cc
  syncline_run/signals.cc
  syncline_run/supervisor.cc
)
target_link_libraries(syncline-run PRIVATE
  syncline::core syncline_cli
  absl::flags absl::flags_parse absl::flags_usage absl::flags_config
  absl::str_format absl::strings absl::status absl::statusor absl::time)
install(TARGETS syncline-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# absl flags recognises a bool flag by the address of a per-type template
# static shared with libabsl_flags; with the project's hidden visibility the
# executable gets its own copy and "--help-env" is rejected as missing a value.
set_target_properties(syncline-run PROPERTIES
  CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
