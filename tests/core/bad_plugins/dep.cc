// A library the "missingdep" plugin needs but the loader cannot find.
extern "C" __attribute__((visibility("default"))) int syncline_test_dep_value() { return 42; }
