# Training utilities of libsyncline_ddp: sampler, seeding, checkpoints.
# The sampler and seeding files do not include libtorch; the checkpoint
# files use only the narrow torch serialization headers.
list(APPEND SYNCLINE_DDP_UTIL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/src/seed.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/sampler.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/sha256.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/checkpoint_files.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/agreement.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/checkpoint_state.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/src/checkpoint.cc
)
