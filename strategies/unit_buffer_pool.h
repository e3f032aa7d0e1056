// UnitBufferPool: keeps the memory of FSDP's released unit buffers (gathered
// parameters, full gradients; ReleasableBuffer, mixed_precision.h) within a
// training step, so that the next buffer of the same size and device reuses
// it instead of a fresh allocation. A fresh allocation above glibc's mmap
// threshold is a fresh mmap that page-faults on first touch and is unmapped
// when freed; FSDP allocates and frees ~2 buffers per unit per micro-batch.
//
// Bounded: the pool holds a block only while the bytes checked out plus the
// bytes pooled stay within the most bytes that were checked out at once since
// Open() (the step's high-water mark of live unit buffers: what FSDP without
// the pool held at that moment). A fresh allocation that would exceed it
// first frees pooled blocks, the oldest first. So the pool never makes unit
// buffers take more memory than they took at their peak without it. (Pooled
// blocks still sit beside what other code allocates until the next Take();
// Flush() frees them before a long stretch without one.)
//
// Scoped: Open() starts keeping released blocks (FSDP: at each micro-batch),
// Close() frees every pooled block and stops keeping them (FSDP: when the
// step ends, before the optimizer step), so between steps nothing is pooled.
// A closed or disabled pool frees released blocks at once and allocates fresh
// ones: the behaviour without a pool.
//
// Blocks are raw memory from the device's current allocator
// (c10::GetAllocator: a TrackingAllocator installed since counts them, and
// counts pooled blocks as live), on the device asked for (AllocateOn); their
// contents are undefined when taken.
//
// Threading: none; the training thread (and autograd hooks on it).
#ifndef STRATA_STRATEGIES_UNIT_BUFFER_POOL_H_
#define STRATA_STRATEGIES_UNIT_BUFFER_POOL_H_

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <deque>

namespace strata::strategies {

// `nbytes` of raw memory from the allocator of `device`'s type, on `device`
// itself: a CUDA allocator allocates on the current device, so `device` is
// made current for the call (restored after). FSDP's buffers are allocated on
// their tensor's device however the current device is set.
c10::DataPtr AllocateOn(c10::Device device, int64_t nbytes);

class UnitBufferPool {
 public:
  struct Counters {
    int64_t fresh_allocations = 0;  // Blocks allocated by Take().
    int64_t reuses = 0;             // Blocks Take() found in the pool.
    int64_t evictions = 0;          // Pooled blocks freed to stay bounded.
  };

  // A disabled pool never keeps a block (Open() does nothing).
  explicit UnitBufferPool(bool enabled = true) : enabled_(enabled) {}
  UnitBufferPool(const UnitBufferPool&) = delete;
  UnitBufferPool& operator=(const UnitBufferPool&) = delete;

  bool enabled() const { return enabled_; }
  bool open() const { return open_; }

  // Starts keeping released blocks (no-op when disabled or open).
  void Open();
  // Frees every pooled block, stops keeping them and resets the high-water
  // mark.
  void Close();
  // Frees every pooled block; stays open. Before a stretch of computation
  // that takes no block (FSDP: the loss, after the last unit's forward),
  // where pooled blocks would add to whatever that computation holds.
  void Flush();

  // A block of `nbytes` on `device`: a pooled one of that size and device if
  // any (the most recently released), else a fresh one from the device's
  // allocator.
  c10::DataPtr Take(int64_t nbytes, c10::Device device);
  // Hands back a block Take() returned or Track() counted: pooled while
  // open, else freed.
  void Give(c10::DataPtr block, int64_t nbytes);
  // Counts a live block of `nbytes` allocated elsewhere (a buffer's first
  // memory) that will be handed back with Give().
  void Track(int64_t nbytes);

  // Bytes of blocks taken and not given back / pooled now.
  int64_t live_bytes() const { return live_bytes_; }
  int64_t pooled_bytes() const { return pooled_bytes_; }
  int64_t num_pooled() const { return static_cast<int64_t>(blocks_.size()); }
  // The most bytes taken at once since Open() (live_bytes() at Open(); 0
  // while closed).
  int64_t high_water_bytes() const { return high_water_bytes_; }
  const Counters& counters() const { return counters_; }

 private:
  struct Block {
    c10::DataPtr data;
    int64_t nbytes = 0;
  };

  const bool enabled_;
  bool open_ = false;
  std::deque<Block> blocks_;  // Oldest released first.
  int64_t live_bytes_ = 0;
  int64_t pooled_bytes_ = 0;
  int64_t high_water_bytes_ = 0;
  Counters counters_;
};

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_UNIT_BUFFER_POOL_H_
