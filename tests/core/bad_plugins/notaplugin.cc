// A shared library that does not export syncline_backend_plugin_v1.
extern "C" __attribute__((visibility("default"))) int some_other_symbol() { return 1; }
