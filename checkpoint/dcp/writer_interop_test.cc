// What SaveDcp writes, loaded by PyTorch 2.6's own torch.distributed.
// checkpoint (testdata/dcp_load.py): saved by 3 Strata ranks holding
// uneven flat shards, loaded by 2 Gloo ranks into DTensors sharded on dim 0
// (PyTorch's planner reshards), and by one process into an nn.Module and
// its AdamW through get_state_dict / dcp.load / set_state_dict: every
// parameter, moment and step byte-identical, the learning rate the one
// saved. Skipped (counted so) under a PyTorch older than 2.4.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/contents.h"
#include "checkpoint/dcp/writer.h"
#include "comm/group.h"
#include "comm/testing/multi_rank.h"
#include "serialization/testing/python_runner.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint::dcp {
namespace {

using serialization::testing::RunPython;
using ::strata::testing::IsOk;

std::string Script(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") +
         "/strata/checkpoint/dcp/testdata/" + name;
}

ShardedTensor RunOf(const std::string& name, const at::Tensor& whole,
                    int64_t begin, int64_t end) {
  return ShardedTensor{name, whole.sizes().vec(), begin,
                       whole.reshape({-1}).narrow(0, begin, end - begin)};
}

class WriterInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = strata::testing::FreshTempDir("dcp_writer_interop");
    const std::string why = serialization::testing::WhyTorchBelow(
        2, 4, "DTensor, dcp.load", dir_ + "/version.log");
    if (!why.empty()) GTEST_SKIP() << why;
    // Saved by 3 ranks: "w" (7x5) and its moments in flat shards cut
    // inside rows, "b" (a vector) and its moments replicated, the step.
    WriteOptions options;
    options.hyper.lr = 0.25;
    Contents contents;
    contents.meta.step = 9;
    contents.meta.optimizer = "adamw";
    ASSERT_THAT(
        comm::testing::RunOnRanks(
            3,
            [&](comm::Group& group) {
              const int64_t cuts[] = {0, 12, 13, 35};
              const int64_t begin = cuts[group.rank()];
              const int64_t end = cuts[group.rank() + 1];
              TensorState state;
              state.model.push_back(RunOf("w", w_, begin, end));
              state.model.push_back(RunOf("b", b_, 0, 6));
              state.optimizer.push_back(RunOf("w.exp_avg", w_avg_, begin, end));
              state.optimizer.push_back(
                  RunOf("w.exp_avg_sq", w_sq_, begin, end));
              state.optimizer.push_back(RunOf("b.exp_avg", b_avg_, 0, 6));
              state.optimizer.push_back(RunOf("b.exp_avg_sq", b_sq_, 0, 6));
              state.optimizer.push_back(
                  ShardedTensor{"step", {}, 0, at::full({1}, 9, at::kLong)});
              EXPECT_THAT(
                  SaveDcp(dir_ + "/dcp", state, contents, &group, options),
                  IsOk());
            }),
        IsOk());
    c10::impl::GenericDict expected(c10::StringType::get(),
                                    c10::TensorType::get());
    expected.insert("model.w", w_);
    expected.insert("model.b", b_);
    expected.insert("optim.state.w.exp_avg", w_avg_);
    expected.insert("optim.state.w.exp_avg_sq", w_sq_);
    expected.insert("optim.state.b.exp_avg", b_avg_);
    expected.insert("optim.state.b.exp_avg_sq", b_sq_);
    expected.insert("optim.state.w.step", at::full({}, 9.0, at::kFloat));
    expected.insert("optim.state.b.step", at::full({}, 9.0, at::kFloat));
    expected.insert("lr", at::full({}, 0.25, at::kDouble));
    ASSERT_THAT(serialization::WriteTorchFile(dir_ + "/expected.pt", expected),
                IsOk());
  }

  std::string dir_;
  const at::Tensor w_ =
      at::arange(35, at::kFloat).mul(0.37).sub(5).reshape({7, 5});
  const at::Tensor b_ = at::arange(6, at::kFloat).mul(0.5);
  const at::Tensor w_avg_ =
      at::arange(35, at::kFloat).mul(-0.01).reshape({7, 5});
  const at::Tensor w_sq_ =
      at::arange(35, at::kFloat).mul(0.002).reshape({7, 5});
  const at::Tensor b_avg_ = at::arange(6, at::kFloat).mul(0.3);
  const at::Tensor b_sq_ = at::arange(6, at::kFloat).mul(0.04);
};

TEST_F(WriterInteropTest, PyTorchLoadsItIntoDTensorsAtTwoRanks) {
  EXPECT_THAT(RunPython({Script("dcp_load.py"), "sharded", dir_ + "/dcp",
                         dir_ + "/expected.pt"},
                        dir_ + "/log_sharded"),
              IsOk());
}

TEST_F(WriterInteropTest, PyTorchSetStateDictLoadsModelAndAdamW) {
  EXPECT_THAT(RunPython({Script("dcp_load.py"), "module", dir_ + "/dcp",
                         dir_ + "/expected.pt"},
                        dir_ + "/log_module"),
              IsOk());
}

}  // namespace
}  // namespace strata::checkpoint::dcp
