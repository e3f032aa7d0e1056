// What data-parallel strategies do when they are created: check that every
// rank built the same model, then give every rank rank 0's weights.
#ifndef STRATA_STRATEGIES_REPLICAS_H_
#define STRATA_STRATEGIES_REPLICAS_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "comm/group.h"
#include "models/unit.h"

namespace strata::strategies {

// Checks that every rank of `group` holds parameters and buffers with the
// same names and shapes, in the same order. Uses only fixed-size collectives
// until the ranks are known to agree, so a mismatch is an error on every
// rank — naming the first differing tensor and both shapes, or both ranks'
// counts — never a Gloo abort. `kind` ("ddp", "zero2") starts the messages.
absl::Status CheckSameModelOnAllRanks(comm::Group& group,
                                      const std::string& kind,
                                      const models::UnitModel& model);

// Broadcasts rank 0's parameters and buffers to every rank (users may build
// different weights per rank). `flat_params` is the flat buffer every
// parameter of `model` is a view of (optim::FlatParameters::params()).
absl::Status BroadcastFromRankZero(comm::Group& group, const std::string& kind,
                                   models::UnitModel& model,
                                   at::Tensor flat_params);

}  // namespace strata::strategies

#endif  // STRATA_STRATEGIES_REPLICAS_H_
