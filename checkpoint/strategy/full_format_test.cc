#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "checkpoint/contents.h"
#include "checkpoint/full.h"
#include "checkpoint/testing/states.h"
#include "comm/group.h"
#include "serialization/torch_file.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

using testing::ExpectGlobalsEqual;
using testing::ExpectSnapshotsEqual;
using testing::Globals;
using testing::MakeStrategy;
using testing::Rank;
using testing::RunRanks;
using testing::Snapshot;
using testing::StateOf;
using testing::TempDir;

Contents SomeContents() {
  Contents c;
  c.meta = NewMeta();
  c.meta.step = 2;
  c.meta.seed = 7;
  c.meta.world_size = 2;
  c.meta.strategy = "zero2";
  c.meta.model_config = "gpt-tiny";
  c.param_scheduler = {{"last_step", 1.0}, {"base_lr", 1e-4}};
  c.extra = {{"sampler.position", int64_t{24}},
             {"note", std::string("hello")},
             {"rng", Bytes{std::string("\0\1\2\3", 4)}},
             {"ratio", 0.5}};
  return c;
}

FullOptions Options() {
  FullOptions o;
  o.hyper.lr = 1e-4;
  o.hyper.weight_decay = 0.1;
  return o;
}

// With `optimizer` (testing::OptimizerNamed), whose class the file's
// param groups get (meta.optimizer).
Globals SaveAt(const std::string& kind, int world, const std::string& path,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 7, 2, optimizer, [&](const Rank& rank) {
    Contents contents = SomeContents();
    contents.meta.optimizer = optimizer;
    EXPECT_THAT(SaveFull(path, rank.state, contents, rank.group, Options()),
                IsOk());
    return true;
  });
}

Globals LoadAt(const std::string& kind, int world, const std::string& path,
               const std::string& optimizer = "adamw") {
  return RunRanks(kind, world, 11, 0, optimizer, [&](const Rank& rank) {
    FullOptions full;
    full.optimizer = optimizer;
    absl::StatusOr<Contents> contents =
        LoadFull(path, rank.state, ReadOptions(), rank.group, full);
    EXPECT_THAT(contents, IsOk());
    if (!contents.ok()) return false;
    EXPECT_THAT(rank.strategy.AfterStateLoaded(), IsOk());
    EXPECT_EQ(contents->meta.step, 2);
    EXPECT_EQ(contents->meta.strategy, "zero2");
    EXPECT_EQ(contents->meta.optimizer, optimizer);
    EXPECT_EQ(contents->param_scheduler, SomeContents().param_scheduler);
    EXPECT_EQ(contents->extra, SomeContents().extra);
    return true;
  });
}

class FullOptimizerTest : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Optimizers, FullOptimizerTest,
                         ::testing::Values("adamw", "adam", "sgd",
                                           "sgd_momentum"));

// Every optimizer's state (testing::OptimizerNamed) through PyTorch's
// layout of its class (checkpoint/torch_optimizer.h) and back, bitwise.
TEST_P(FullOptimizerTest, RoundTripAcrossStrategiesAndWorldSizes) {
  for (const auto& [save_kind, n, load_kind, m] :
       std::vector<std::tuple<std::string, int, std::string, int>>{
           {"single", 1, "zero2", 3},
           {"ddp", 2, "single", 1},
           {"zero2", 4, "zero1", 3},
           {"zero1", 3, "ddp", 2},
           {"fsdp", 3, "zero2", 2},
           {"ddp", 2, "fsdp", 4}}) {
    const std::string what = absl::StrCat(GetParam(), ": ", save_kind, " at ",
                                          n, " -> ", load_kind, " at ", m);
    const std::string path =
        TempDir(absl::StrCat("full_", GetParam(), "_", save_kind, n)) +
        "/ckpt.pth";
    const Globals saved = SaveAt(save_kind, n, path, GetParam());
    ExpectGlobalsEqual(LoadAt(load_kind, m, path, GetParam()), saved, what);
    // Nothing but the checkpoint is left (no temporary file).
    for (const auto& entry : std::filesystem::directory_iterator(
             std::filesystem::path(path).parent_path())) {
      EXPECT_EQ(entry.path().string(), path) << what;
    }
  }
}

int RunPython(const std::string& script, const std::string& args,
              const std::string& log) {
  const std::string script_path = log + ".py";
  std::ofstream(script_path) << script;
  const std::string command =
      absl::StrCat("OMP_NUM_THREADS=1 /usr/bin/python3 ", script_path, " ",
                   args, " > ", log, " 2>&1");
  return std::system(command.c_str());
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Python's torch.load reads the file: mmengine's layout, the meta values,
// PyTorch's optimizer structure (an AdamW over tensors of the parameters'
// shapes accepts it in load_state_dict), and the same tensors (written back
// by Python with torch.save and compared bitwise here).
TEST(FullTest, PythonTorchLoadReadsTheFile) {
  const std::string dir = TempDir("full_python");
  const std::string path = dir + "/ckpt.pth";
  const Globals saved = SaveAt("zero2", 2, path);
  const std::string script = R"PY(
import sys, torch
ck = torch.load(sys.argv[1])
for key in ("meta", "state_dict", "optimizer", "param_schedulers"):
    assert key in ck, key
m = ck["meta"]
assert m["step"] == 2 and m["seed"] == 7 and m["world_size"] == 2, m
assert m["strategy"] == "zero2" and m["strata_version"] == "0.1.0", m
assert ck["param_schedulers"] == [{"last_step": 1.0, "base_lr": 1e-4}]
assert ck["sampler.position"] == 24 and ck["note"] == "hello"
assert ck["rng"].tolist() == [0, 1, 2, 3]
opt = ck["optimizer"]
names = opt["param_names"]
sd = ck["state_dict"]
assert sorted(sd.keys()) == sorted(names), (list(sd.keys()), names)
params = {n: torch.zeros_like(sd[n], requires_grad=True) for n in names}
groups = [{"params": [params[names[i]] for i in g["params"]]}
          for g in opt["param_groups"]]
adamw = torch.optim.AdamW(groups)
# Hyperparameters AdamW.state_dict() writes (each PyTorch's own set: 2.x adds
# some, which loading fills with their defaults), and the indices it uses.
fresh = adamw.state_dict()["param_groups"][0].keys()
assert set(opt["param_groups"][0].keys()) <= set(fresh), \
    (opt["param_groups"][0].keys(), fresh)
assert [g["params"] for g in adamw.state_dict()["param_groups"]] == \
    [g["params"] for g in opt["param_groups"]]
adamw.load_state_dict(opt)
assert adamw.state_dict()["param_groups"][0].keys() == fresh
assert [g["weight_decay"] for g in adamw.param_groups] == [0.1, 0.0]
assert [g["lr"] for g in adamw.param_groups] == [1e-4, 1e-4]
decay = [names[i] for i in opt["param_groups"][0]["params"]]
assert all(sd[n].dim() >= 2 for n in decay), decay
assert all(sd[n].dim() < 2 for n in names if n not in decay)
params = [params[n] for n in names]
exp_avg = {n: adamw.state[p]["exp_avg"] for n, p in zip(names, params)}
assert all(adamw.state[p]["step"].dtype == torch.float32 and
           adamw.state[p]["step"].item() == 2 for p in params)
torch.save({"state_dict": dict(sd), "exp_avg": exp_avg}, sys.argv[2])
print("ok")
)PY";
  const std::string out = dir + "/from_python.pt";
  ASSERT_EQ(RunPython(script, path + " " + out, dir + "/python.log"), 0)
      << ReadText(dir + "/python.log");
  auto read = serialization::ReadTorchFile(out);
  ASSERT_THAT(read, IsOk());
  auto root = read->toGenericDict();
  int compared = 0;
  for (const auto& kv : root.at("state_dict").toGenericDict()) {
    const std::string name = kv.key().toStringRef();
    EXPECT_TRUE(at::equal(kv.value().toTensor().reshape({-1}),
                          saved.at("model/" + name)))
        << name;
    ++compared;
  }
  for (const auto& kv : root.at("exp_avg").toGenericDict()) {
    const std::string name = kv.key().toStringRef();
    EXPECT_TRUE(at::equal(kv.value().toTensor().reshape({-1}),
                          saved.at("optimizer/" + name + ".exp_avg")))
        << name;
  }
  EXPECT_EQ(compared,
            static_cast<int>(
                StateOf(*MakeStrategy("single", nullptr, 1, 0)).model.size()));
}

// A state dict saved by Python's torch.save (an OrderedDict) loads into the
// C++ model.
TEST(FullTest, PythonSavedStateDictLoadsIntoTheModel) {
  const std::string dir = TempDir("full_from_python");
  const std::string path = dir + "/ckpt.pth";
  const Globals saved = SaveAt("single", 1, path);
  const std::string script = R"PY(
import sys, torch, collections
ck = torch.load(sys.argv[1])
sd = collections.OrderedDict((k, v * 2) for k, v in ck["state_dict"].items())
torch.save(sd, sys.argv[2])
)PY";
  const std::string python_sd = dir + "/python_state_dict.pt";
  ASSERT_EQ(RunPython(script, path + " " + python_sd, dir + "/python.log"), 0)
      << ReadText(dir + "/python.log");
  ReadOptions options;
  options.load_optimizer = false;
  auto strategy = MakeStrategy("single", nullptr, 11, 0);
  ASSERT_NE(strategy, nullptr);
  auto contents = LoadFull(python_sd, StateOf(*strategy), options, nullptr);
  ASSERT_THAT(contents, IsOk());
  for (const auto& run : StateOf(*strategy).model) {
    // x * 2 is exact in float.
    EXPECT_TRUE(
        at::equal(run.local.reshape({-1}), saved.at("model/" + run.name) * 2))
        << run.name;
  }
}

class FullBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    path_ = dir_ + "/ckpt.pth";
    saved_ = SaveAt("single", 1, path_);
    live_ = MakeStrategy("single", nullptr, 11, 0);
    ASSERT_NE(live_, nullptr);
    before_ = Snapshot(StateOf(*live_));
  }
  absl::Status Load(const std::string& path, const ReadOptions& options = {}) {
    return LoadFull(path, StateOf(*live_), options, nullptr).status();
  }
  void ExpectUntouched() {
    ExpectSnapshotsEqual(Snapshot(StateOf(*live_)), before_, "live state");
  }
  std::string dir_, path_;
  Globals saved_;
  std::unique_ptr<strategies::Strategy> live_;
  std::map<std::string, at::Tensor> before_;
};

TEST_F(FullBadInputTest, FlippedBitNamesTheTensor) {
  // Find the bytes of one tensor in the archive (stored uncompressed) and
  // flip one bit in the middle.
  const std::string name = "blocks.0.mlp.fc.weight";
  const at::Tensor t = saved_.at("model/" + name);
  ASSERT_GT(t.numel(), 64);
  std::string bytes = ReadText(path_);
  const std::string needle(static_cast<const char*>(t.data_ptr()), 256);
  const size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 100] ^= 0x01;
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  const absl::Status s = Load(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  // The record's zip CRC-32 catches it, named by the tensor's key.
  EXPECT_NE(s.message().find("tensor 'state_dict/" + name + "'"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("fails its CRC-32"), std::string::npos) << s;
  ExpectUntouched();
}

TEST_F(FullBadInputTest, TruncatedFileIsRefused) {
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  const absl::Status s = Load(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  ExpectUntouched();
}

TEST_F(FullBadInputTest, StrictListsMissingAndUnexpectedKeys) {
  ReadOptions options;
  options.revise_keys = {{"^blocks\\.1\\.", "layers.1."}};
  const absl::Status s = Load(path_, options);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing keys: blocks.1."), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("unexpected keys: layers.1."), std::string::npos)
      << s;
  ExpectUntouched();
}

TEST_F(FullBadInputTest, PathsThatAreNotCheckpoints) {
  std::ofstream(dir_ + "/text.txt") << "not a checkpoint";
  for (const std::string& path :
       {dir_ + "/text.txt", dir_, dir_ + "/missing.pth"}) {
    const absl::Status s = Load(path);
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_NE(s.message().find(path), std::string::npos) << s;
  }
  ExpectUntouched();
}

}  // namespace
}  // namespace strata::checkpoint
