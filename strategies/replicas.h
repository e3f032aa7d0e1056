// What data-parallel strategies share: at creation, check that every rank
// built the same model and give every rank rank 0's weights; at each step,
// clip gradients by their global norm across shards.
#ifndef STRATA_STRATEGIES_REPLICAS_H_
#define STRATA_STRATEGIES_REPLICAS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/group.h"
#include "models/unit.h"
#include "strategies/options.h"

namespace strata::strategies {

// A name with a shape that every rank must hold the same of.
struct NamedShape {
  std::string name;
  std::vector<int64_t> shape;
};

// How CheckSameOnAllRanks's messages name what it checks; the defaults are
// the model check's.
struct SameOnAllRanksWording {
  std::string differ = "ranks hold different models";
  std::string items = "parameters and buffers";
  std::string item = "parameter";
  std::string order = "in registration order";
  std::string remedy = "every rank must build the same model";
};

// Checks that every rank of `group` holds `infos` with the same names and
// shapes, in the same order (a collective). Uses only fixed-size collectives
// until the ranks are known to agree, so a mismatch is an error on every
// rank — naming the first differing item and both shapes, or both ranks'
// counts, in `wording` — never a Gloo abort.
absl::Status CheckSameOnAllRanks(comm::Group& group,
                                 const std::vector<NamedShape>& infos,
                                 const SameOnAllRanksWording& wording);

// CheckSameOnAllRanks over the model's parameters, then buffers (named
// "buffer:<name>"): every rank of `group` holds parameters and buffers with
// the same names and shapes, in the same order. Uses only fixed-size
// collectives until the ranks are known to agree, so a mismatch is an error on
// every rank — naming the first differing tensor and both shapes, or both
// ranks' counts — never a Gloo abort. `kind` ("ddp", "zero2") starts the
// messages.
absl::Status CheckSameModelOnAllRanks(comm::Group& group,
                                      const std::string& kind,
                                      const models::UnitModel& model);

// Broadcasts rank 0's parameters and buffers to every rank (users may build
// different weights per rank). `flat_params` is the flat buffer every
// parameter of `model` is a view of (optim::FlatParameters::params()).
absl::Status BroadcastFromRankZero(comm::Group& group, const std::string& kind,
                                   models::UnitModel& model,
                                   at::Tensor flat_params);

// Clips `grads` to the global norm `config.grad_clip` (0: only measures) of
// type `config.grad_clip_norm_type` and returns the norm before clipping
// (optim::ClipGradNorm). With `group`, `grads` is this rank's shard of
// disjoint shards: the norm's parts are all-reduced over `group` (a
// collective; a sum, or a max for the infinity norm) and every rank scales
// by the same factor. Errors name `kind` and the rank.
absl::StatusOr<double> ClipGradients(at::Tensor grads,
                                     const OptimizerConfig& config,
                                     comm::Group* group,
                                     const std::string& kind);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_REPLICAS_H_
