#include "comm/wait_clock.h"

namespace strata::comm {
namespace {

thread_local double thread_wait_seconds = 0;

}  // namespace

double ThreadCollectiveWaitSeconds() { return thread_wait_seconds; }

CollectiveWaitTimer::CollectiveWaitTimer()
    : start_(std::chrono::steady_clock::now()) {}

CollectiveWaitTimer::~CollectiveWaitTimer() {
  thread_wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
}

}  // namespace strata::comm
