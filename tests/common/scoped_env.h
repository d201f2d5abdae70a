// scoped_env.h: set an environment variable for the length of a test.
//
// setenv is not thread-safe against getenv in other threads: create a
// ScopedEnv before the test starts threads, and let it go after they end.
#ifndef SYNCLINE_TESTS_COMMON_SCOPED_ENV_H_
#define SYNCLINE_TESTS_COMMON_SCOPED_ENV_H_

#include <cstdlib>
#include <string>

namespace syncline::testing {

// Sets one variable for the life of the object, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    had_ ? (void)::setenv(name_, old_.c_str(), 1) : (void)::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace syncline::testing

#endif  // SYNCLINE_TESTS_COMMON_SCOPED_ENV_H_
