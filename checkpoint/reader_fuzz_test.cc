// Fuzz tests of the checkpoint readers: a tiny checkpoint of each format is
// mutated many times (seeded, deterministic: bit flips, byte rewrites,
// truncations and insertions at positions drawn over the whole file, so
// every region — zip headers, pickle, records, central directory, metadata
// header and payload, data blocks — is hit), and every mutation must give
// either a clean error or contents identical to the original. A crash,
// CHECK failure, uncaught exception or hang fails the test (a hang by the
// test's timeout); "accepted" counts loads whose contents differ and must
// be zero.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/shape.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "checkpoint/contents.h"
#include "checkpoint/full.h"
#include "checkpoint/local.h"
#include "checkpoint/sharded.h"

namespace strata::checkpoint {
namespace {

using ::strata::testing::IsOk;

constexpr int kMutations = 10000;

std::string ReadBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), bytes.size());
}

// A few hundred bytes of state: model tensors of 4x8 and 16 floats, their
// AdamW moments and the step.
TensorState State(bool zero) {
  auto fill = [&](const std::vector<int64_t>& shape, float base) {
    const int64_t n = NumElements(shape);
    return zero ? at::zeros({n}, at::kFloat)
                : at::arange(n, at::kFloat) * 0.5f + base;
  };
  TensorState s;
  s.model.push_back({"w", {4, 8}, 0, fill({4, 8}, 1.0f)});
  s.model.push_back({"b", {16}, 0, fill({16}, -3.0f)});
  // AdamW's whole state (the full format stores it as PyTorch's
  // optimizer state dict, which has both moments of every parameter).
  s.optimizer.push_back({"w.exp_avg", {4, 8}, 0, fill({4, 8}, 7.0f)});
  s.optimizer.push_back({"w.exp_avg_sq", {4, 8}, 0, fill({4, 8}, 2.0f)});
  s.optimizer.push_back({"b.exp_avg", {16}, 0, fill({16}, 5.0f)});
  s.optimizer.push_back({"b.exp_avg_sq", {16}, 0, fill({16}, 4.0f)});
  s.optimizer.push_back(
      {"step",
       {},
       0,
       zero ? at::zeros({1}, at::kLong) : at::full({1}, 5, at::kLong)});
  return s;
}

Contents SomeContents() {
  Contents c;
  c.meta = NewMeta();
  c.meta.step = 5;
  c.meta.seed = 3;
  c.meta.strategy = "single";
  c.param_scheduler = {{"kind", std::string("cosine")},
                       {"last_step", int64_t{5}},
                       {"base_lr", 1e-3}};
  c.extra = {{"sampler.position", int64_t{40}},
             {"rng", Bytes{std::string("\0\1\2\3\4\5\6\7", 8)}},
             {"note", std::string("fuzz")}};
  return c;
}

// Everything a load produced, as bytes: the live tensors and the contents.
std::string Fingerprint(const TensorState& state, const Contents& c) {
  std::string out;
  for (const auto* runs : {&state.model, &state.optimizer}) {
    for (const ShardedTensor& run : *runs) {
      at::Tensor t = run.local.contiguous();
      absl::StrAppend(&out, run.name, "|", run.offset, "|",
                      std::string(static_cast<const char*>(t.data_ptr()),
                                  t.numel() * t.element_size()),
                      "\n");
    }
  }
  const Meta& m = c.meta;
  absl::StrAppend(&out, m.step, "|", m.seed, "|", m.time, "|", m.strata_version,
                  "|", m.git_hash, "|", m.world_size, "|", m.strategy, "|",
                  m.model_config, "\n");
  checkpoint::NamedValues named = c.param_scheduler;
  named.insert(named.end(), c.extra.begin(), c.extra.end());
  for (const auto& [key, value] : named) {
    absl::StrAppend(&out, key, "=", value.index(), ":");
    if (const auto* i = std::get_if<int64_t>(&value)) absl::StrAppend(&out, *i);
    if (const auto* d = std::get_if<double>(&value)) absl::StrAppend(&out, *d);
    if (const auto* s = std::get_if<std::string>(&value)) out += *s;
    if (const auto* b = std::get_if<Bytes>(&value)) out += b->data;
    out += "\n";
  }
  return out;
}

// Loads the checkpoint as the reader under test does, into fresh state.
using Loader = std::function<absl::StatusOr<std::string>()>;

struct Tally {
  int rejected = 0;
  int harmless = 0;
  int accepted = 0;
};

// Mutation i of `original`, described in `what`: i % 4 picks the kind.
std::string Mutate(const std::string& original, int i, std::mt19937_64& rng,
                   std::string* what) {
  std::string bytes = original;
  auto below = [&](uint64_t n) { return static_cast<size_t>(rng() % n); };
  const size_t pos = below(bytes.size());
  switch (i % 4) {
    case 0: {
      const int bit = static_cast<int>(below(8));
      bytes[pos] ^= static_cast<char>(1 << bit);
      *what = absl::StrCat("flip bit ", bit, " of byte ", pos);
      break;
    }
    case 1: {
      const size_t n = std::min<size_t>(1 + below(8), bytes.size() - pos);
      for (size_t k = 0; k < n; ++k) bytes[pos + k] = static_cast<char>(rng());
      *what = absl::StrCat("rewrite ", n, " bytes at ", pos);
      break;
    }
    case 2:
      bytes.resize(pos);
      *what = absl::StrCat("truncate to ", pos, " bytes");
      break;
    default: {
      std::string inserted(1 + below(16), '\0');
      for (char& c : inserted) c = static_cast<char>(rng());
      bytes.insert(pos, inserted);
      *what = absl::StrCat("insert ", inserted.size(), " bytes at ", pos);
      break;
    }
  }
  return bytes;
}

// Mutates `target` kMutations times (restoring it after each), loading with
// `load` each time.
Tally Fuzz(const std::string& target, uint64_t seed, const Loader& load) {
  absl::StatusOr<std::string> expected = load();
  EXPECT_THAT(expected.status(), IsOk());
  const std::string original = ReadBytes(target);
  EXPECT_GT(original.size(), 0u);
  std::mt19937_64 rng(seed);
  Tally tally;
  for (int i = 0; i < kMutations; ++i) {
    std::string what;
    WriteBytes(target, Mutate(original, i, rng, &what));
    absl::StatusOr<std::string> loaded = load();
    if (!loaded.ok()) {
      ++tally.rejected;
    } else if (*loaded == *expected) {
      ++tally.harmless;
    } else {
      ++tally.accepted;
      ADD_FAILURE() << target << ": mutation " << i << " (" << what
                    << ") was accepted with different contents";
    }
  }
  WriteBytes(target, original);
  LOG(INFO) << target << ": " << kMutations << " mutations, " << tally.rejected
            << " rejected, " << tally.harmless << " harmless, "
            << tally.accepted << " accepted";
  return tally;
}

TEST(ReaderFuzzTest, Full) {
  const std::string path = testing::FreshTempDir("fuzz_full") + "/ckpt.pth";
  ASSERT_THAT(SaveFull(path, State(false), SomeContents(), nullptr), IsOk());
  const Tally tally = Fuzz(path, 1, [&]() -> absl::StatusOr<std::string> {
    const TensorState live = State(true);
    absl::StatusOr<Contents> c = LoadFull(path, live, ReadOptions(), nullptr);
    if (!c.ok()) return c.status();
    return Fingerprint(live, *c);
  });
  EXPECT_EQ(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

Loader LocalLoader(const std::string& dir) {
  return [dir]() -> absl::StatusOr<std::string> {
    const TensorState live = State(true);
    absl::StatusOr<Contents> c =
        LoadLocal(dir, live, "single", /*load_optimizer=*/true, nullptr);
    if (!c.ok()) return c.status();
    return Fingerprint(live, *c);
  };
}

TEST(ReaderFuzzTest, LocalRankFile) {
  const std::string dir = testing::FreshTempDir("fuzz_local_rank") + "/ckpt";
  ASSERT_THAT(SaveLocal(dir, State(false), SomeContents(), "single", nullptr),
              IsOk());
  const Tally tally = Fuzz(dir + "/rank0.pth", 2, LocalLoader(dir));
  EXPECT_EQ(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

TEST(ReaderFuzzTest, LocalMetadata) {
  const std::string dir =
      testing::FreshTempDir("fuzz_local_metadata") + "/ckpt";
  ASSERT_THAT(SaveLocal(dir, State(false), SomeContents(), "single", nullptr),
              IsOk());
  const Tally tally = Fuzz(dir + "/metadata.pb", 3, LocalLoader(dir));
  EXPECT_EQ(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

Loader ShardedLoader(const std::string& dir) {
  return [dir]() -> absl::StatusOr<std::string> {
    const TensorState live = State(true);
    absl::StatusOr<Contents> c = LoadSharded(dir, live, ReadOptions(), nullptr);
    if (!c.ok()) return c.status();
    return Fingerprint(live, *c);
  };
}

// Blocks of 64 bytes: each tensor spans several checksum blocks.
WriteOptions SmallBlocks() {
  WriteOptions options;
  options.block_bytes = 64;
  return options;
}

TEST(ReaderFuzzTest, ShardedMetadata) {
  const std::string dir =
      testing::FreshTempDir("fuzz_sharded_metadata") + "/ckpt";
  ASSERT_THAT(
      SaveSharded(dir, State(false), SomeContents(), nullptr, SmallBlocks()),
      IsOk());
  const Tally tally = Fuzz(dir + "/metadata.pb", 4, ShardedLoader(dir));
  EXPECT_EQ(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

TEST(ReaderFuzzTest, ShardedData) {
  const std::string dir = testing::FreshTempDir("fuzz_sharded_data") + "/ckpt";
  ASSERT_THAT(
      SaveSharded(dir, State(false), SomeContents(), nullptr, SmallBlocks()),
      IsOk());
  const Tally tally = Fuzz(dir + "/rank0.data", 5, ShardedLoader(dir));
  EXPECT_EQ(tally.accepted, 0);
  EXPECT_GT(tally.rejected, 0);
}

}  // namespace
}  // namespace strata::checkpoint
