// A shared library that exports no syncline_backend_plugin_v<N>.
extern "C" __attribute__((visibility("default"))) int some_other_symbol() { return 1; }
