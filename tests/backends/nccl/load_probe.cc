// nccl_load_probe <backend>: creates a one-rank communicator for CUDA
// buffers over <backend> and prints how that went, for the plugin tests
// that must control the dynamic loader (they run it under ld.so). Prints
// "loaded: <name>" and exits 0 when the communicator was created; prints
// the error and exits 1 otherwise.
#include <cstdio>

#include "syncline/communicator.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nccl_load_probe <backend>\n");
    return 2;
  }
  syncline::CommunicatorOptions options;
  options.backend = argv[1];
  options.device = syncline::Device::Cuda(0);
  options.rank = -1;
  auto comm = syncline::Communicator::Create(options);
  if (!comm.ok()) {
    std::printf("error: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  std::printf("loaded: %s\n", (*comm)->backend_name().c_str());
  return 0;
}
