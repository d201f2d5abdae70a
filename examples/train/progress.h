// progress.h: what the trainer prints while it runs.
//
// On rank 0, when stdout is a terminal, a progress bar is redrawn in place
// during each epoch. Every selected rank (SYNCLINE_LOG_RANKS, rank 0 by
// default) prints one plain line per epoch and a one-line summary at the
// end, on stdout, so the output of a CI run or a pipe stays readable.
//
// Threading: the training thread only.
//
// Example:
//   Progress progress(comm->rank(), comm->size());
//   progress.Step(epoch, epochs, i, steps, loss);   // bar (terminal only)
//   progress.Line("epoch 1/10 ...");                 // plain line
#ifndef SYNCLINE_EXAMPLES_TRAIN_PROGRESS_H_
#define SYNCLINE_EXAMPLES_TRAIN_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace syncline::train {

class Progress {
 public:
  // Reads SYNCLINE_LOG_RANKS (through the core's log settings) and whether
  // stdout is a terminal.
  Progress(int rank, int world_size);

  // Redraws the bar for step `step` (1-based) of `steps` in the epoch, at
  // most ~10 times a second. A no-op unless this is rank 0 on a terminal.
  void Step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss);

  // Prints one line (after clearing the bar) on the selected ranks.
  void Line(const std::string& line);

  bool bar_enabled() const { return bar_; }

 private:
  void ClearBar();

  std::string prefix_;  // "[rank r/w] " when more than one rank prints
  bool print_ = false;
  bool bar_ = false;
  bool bar_visible_ = false;
  absl::Time last_draw_ = absl::InfinitePast();
};

}  // namespace syncline::train

#endif  // SYNCLINE_EXAMPLES_TRAIN_PROGRESS_H_
