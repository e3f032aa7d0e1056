// How long a thread has been blocked waiting for collectives: the
// communication it did not overlap with its own work. comm::Group times
// every wait with a CollectiveWaitTimer (Work::Wait and the sync forms,
// Barrier, check_collectives' exchanges); the trainer reads the counter
// around phases of a step (--wall_clock_breakdown).
#ifndef STRATA_COMM_WAIT_CLOCK_H_
#define STRATA_COMM_WAIT_CLOCK_H_

#include <chrono>

namespace strata::comm {

// Seconds the calling thread has spent inside CollectiveWaitTimers since it
// started. Steady clock; monotonic: take differences. Communication that
// finished while the thread did other work costs nothing here.
double ThreadCollectiveWaitSeconds();

// Adds the time from its construction to its destruction to the calling
// thread's ThreadCollectiveWaitSeconds(). Construct and destroy it on the
// same thread (a scope around a blocking wait).
class CollectiveWaitTimer {
 public:
  CollectiveWaitTimer();
  ~CollectiveWaitTimer();
  CollectiveWaitTimer(const CollectiveWaitTimer&) = delete;
  CollectiveWaitTimer& operator=(const CollectiveWaitTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace strata::comm

#endif  // STRATA_COMM_WAIT_CLOCK_H_
