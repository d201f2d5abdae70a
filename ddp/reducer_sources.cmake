# Sources of the reducer side of libsyncline_ddp (DistributedDataParallel,
# buckets, comm hooks, GradScaler). Listed explicitly; see ddp/CMakeLists.txt.
list(APPEND SYNCLINE_DDP_REDUCER_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/src/error.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/torch_interop.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/bucket_layout.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/replica_check.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/comm_hooks.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/reducer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/reducer_finalize.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/distributed.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/grad_scaler.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/pitfall_checks.cc
)
