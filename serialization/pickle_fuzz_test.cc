// Fuzz tests of the pickle interpreter (ReadPickle) on its own: file-level
// fuzzing (checkpoint/reader_fuzz_test.cc) never reaches it, because the
// zip reader rejects an entry whose CRC-32 does not match first. Real
// pickles are mutated many times (seeded, deterministic: bit flips, byte
// rewrites, truncations, insertions, spliced pieces of the pickle and
// inserted opcodes) and each mutation must give either an error or a value.
// A crash, CHECK failure, uncaught exception, stack overflow or hang fails
// the test (a hang by the test's timeout). Also: nesting deeper than
// kMaxPickleNesting, or a container containing itself, is an error.
#include <ATen/ops/arange.h>
#include <ATen/ops/ones.h>
#include <glog/logging.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "serialization/pickle_reader.h"
#include "serialization/pickle_writer.h"

namespace strata::serialization {
namespace {

using ::strata::testing::IsOk;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kMutations = 12000;  // 2000 of each of the 6 kinds

// The largest storage the test's loader makes: a mutated element count
// must not make the test allocate gigabytes.
constexpr int64_t kMaxStorageElements = 1 << 12;

absl::StatusOr<at::Tensor> SmallStorage(const std::string& key,
                                        at::ScalarType dtype, int64_t numel) {
  if (numel > kMaxStorageElements) {
    return absl::ResourceExhaustedError(
        absl::StrCat("storage ", key, " of ", numel, " elements is too big"));
  }
  return at::arange(numel, at::TensorOptions().dtype(dtype));
}

absl::StatusOr<c10::IValue> Read(const std::string& pickle) {
  return ReadPickle(pickle, "fuzz.pkl", SmallStorage);
}

// The bytes of a string literal, NULs included.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

// A checkpoint-like value, pickled by Strata's writer (torch::jit::Pickler):
// nested dicts and lists, strings, ints, floats, bools, None and tensors
// (two sharing a storage).
std::string StrataPickle() {
  c10::impl::GenericDict model(c10::StringType::get(), c10::AnyType::get());
  const at::Tensor w = at::arange(12, at::kFloat).reshape({3, 4});
  model.insert("w", w);
  model.insert("w_t", w.t());
  model.insert("b", at::ones({4}, at::kDouble));
  model.insert("step", at::arange(1, at::kLong));
  c10::impl::GenericList betas(c10::AnyType::get());
  betas.push_back(0.9);
  betas.push_back(0.999);
  c10::impl::GenericDict group(c10::StringType::get(), c10::AnyType::get());
  group.insert("lr", 1e-3);
  group.insert("betas", betas);
  group.insert("amsgrad", false);
  group.insert("maximize", c10::IValue());
  c10::impl::GenericList groups(c10::AnyType::get());
  groups.push_back(group);
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("model", model);
  root.insert("param_groups", groups);
  root.insert("step", int64_t{123456789012});
  root.insert("note", std::string("fuzz \xe2\x9c\x93"));
  root.insert("pair", c10::ivalue::Tuple::create({int64_t{-1}, 2.5}));
  absl::StatusOr<Pickled> pickled = Pickle(root);
  EXPECT_THAT(pickled.status(), IsOk());
  return pickled.ok() ? pickled->data : "";
}

// A state dict as Python's torch.save writes it (protocol 2): an
// OrderedDict of two tensors rebuilt with _rebuild_tensor_v2 over
// persistent-id storages, its `_metadata` attribute set with BUILD, and
// memo puts and gets throughout.
std::string PythonStateDictPickle() {
  return Bytes(
      "\x80\x02"
      "ccollections\nOrderedDict\nq\x00)Rq\x01"
      "(X\x06\x00\x00\x00weightq\x02"
      "ctorch._utils\n_rebuild_tensor_v2\nq\x03"
      "((X\x07\x00\x00\x00storageq\x04"
      "ctorch\nFloatStorage\nq\x05"
      "X\x01\x00\x00\x00"
      "0q\x06X\x03\x00\x00\x00"
      "cpuq\x07K\x04tq\x08Q"
      "K\x00K\x02K\x02\x86q\tK\x02K\x01\x86q\n\x89h\x00)Rq\x0btq\x0cRq\r"
      "X\x04\x00\x00\x00"
      "biasq\x0eh\x03"
      "((h\x04h\x05X\x01\x00\x00\x00"
      "1q\x0fh\x07K\x02tq\x10Q"
      "K\x00K\x02\x85q\x11K\x01\x85q\x12\x89h\x00)Rq\x13tq\x14Rq\x15u"
      "}q\x16X\t\x00\x00\x00_metadataq\x17h\x00)Rq\x18"
      "X\x00\x00\x00\x00}q\x19X\x07\x00\x00\x00versionK\x01sssb.");
}

// Opcodes the interpreter knows, with a zero argument where one is needed,
// for the "insert opcodes" mutation.
const std::vector<std::string>& Opcodes() {
  static const auto* const kOpcodes = new std::vector<std::string>{
      "(",     "0",     "1",     "2",         "N",
      "\x88",  "\x89",  "K\x00", "M\x00\x00", "G" + std::string(8, '\0'),
      ")",     "t",     "\x85",  "\x86",      "\x87",
      "]",     "l",     "a",     "e",         "}",
      "d",     "s",     "u",     "q\x00",     "\x94",
      "h\x00", "h\x01", "R",     "\x81",      "b",
      "Q",     "\x93",  ".",     "\x8c\x00",  "\x8a\x01\xff"};
  return *kOpcodes;
}

// Mutation i of `original`, described in `what`: i % 6 picks the kind.
std::string Mutate(const std::string& original, int i, std::mt19937_64& rng,
                   std::string* what) {
  std::string bytes = original;
  auto below = [&](uint64_t n) { return static_cast<size_t>(rng() % n); };
  const size_t pos = below(bytes.size());
  switch (i % 6) {
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
    case 3: {
      std::string inserted(1 + below(16), '\0');
      for (char& c : inserted) c = static_cast<char>(rng());
      bytes.insert(pos, inserted);
      *what = absl::StrCat("insert ", inserted.size(), " bytes at ", pos);
      break;
    }
    case 4: {
      // A piece of the pickle itself (whole opcodes, often) elsewhere.
      const size_t from = below(original.size());
      const size_t n = std::min<size_t>(1 + below(16), original.size() - from);
      bytes.insert(pos, original.substr(from, n));
      *what = absl::StrCat("splice ", n, " bytes from ", from, " at ", pos);
      break;
    }
    default: {
      std::string inserted;
      const size_t n = 1 + below(4);
      for (size_t k = 0; k < n; ++k) {
        inserted += Opcodes()[below(Opcodes().size())];
      }
      bytes.insert(pos, inserted);
      *what = absl::StrCat("insert ", n, " opcodes at ", pos);
      break;
    }
  }
  return bytes;
}

struct Tally {
  int rejected = 0;
  int parsed = 0;
};

// Reads kMutations mutations of `original`. Every error must be
// InvalidArgument (the pickle's fault) or the loader's ResourceExhausted.
Tally Fuzz(const std::string& name, const std::string& original,
           uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tally tally;
  for (int i = 0; i < kMutations; ++i) {
    std::string what;
    const absl::StatusOr<c10::IValue> read =
        Read(Mutate(original, i, rng, &what));
    if (read.ok()) {
      ++tally.parsed;
      continue;
    }
    ++tally.rejected;
    const absl::StatusCode code = read.status().code();
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kResourceExhausted) {
      ADD_FAILURE() << name << ": mutation " << i << " (" << what
                    << ") gave an unexpected error: " << read.status();
    }
  }
  LOG(INFO) << name << ": " << kMutations << " mutations, " << tally.rejected
            << " rejected, " << tally.parsed << " parsed";
  return tally;
}

TEST(PickleFuzzTest, StrataPickleOriginalIsRead) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, Read(StrataPickle()));
  EXPECT_EQ(value.toGenericDict().at("step").toInt(), 123456789012);
}

TEST(PickleFuzzTest, StrataPickleMutationsGiveAValueOrAnError) {
  const std::string original = StrataPickle();
  ASSERT_FALSE(original.empty());
  const Tally tally = Fuzz("strata pickle", original, 11);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_GT(tally.parsed, 0);
}

TEST(PickleFuzzTest, PythonStateDictOriginalIsRead) {
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, Read(PythonStateDictPickle()));
  const auto dict = value.toGenericDict();
  ASSERT_EQ(dict.size(), 2);
  EXPECT_EQ(dict.at("weight").toTensor().sizes(), at::IntArrayRef({2, 2}));
  EXPECT_EQ(dict.at("bias").toTensor().sizes(), at::IntArrayRef({2}));
}

TEST(PickleFuzzTest, PythonStateDictMutationsGiveAValueOrAnError) {
  const Tally tally = Fuzz("python state dict", PythonStateDictPickle(), 12);
  EXPECT_GT(tally.rejected, 0);
  EXPECT_GT(tally.parsed, 0);
}

// Opcodes that wrap the value on top of the stack in a container, using
// memo entry `id` (BINPUT, POP, then BINGET inside the new container).
std::string WrapInList(char id) {
  return std::string("q") + id + "0](h" + id + "e";  // [x]
}
std::string WrapInDict(char id) {
  return std::string("q") + id + "0}K\x07h" + id + "s";  // {7: x}
}
std::string WrapInTuple() { return "\x85"; }  // (x,)

// `levels` containers, cycling through list, dict and tuple, around the
// value on top of the stack.
std::string Wrap(int levels, char id) {
  std::string pickle;
  for (int i = 0; i < levels; ++i) {
    pickle += i % 3 == 0   ? WrapInList(id)
              : i % 3 == 1 ? WrapInDict(id)
                           : WrapInTuple();
  }
  return pickle;
}

// `levels` containers around None.
std::string Nested(int levels, char id) { return "N" + Wrap(levels, id); }

TEST(PickleNestingTest, HundredThousandLevelsAreRejectedNamingTheLimit) {
  const std::string pickle = "\x80\x02" + Nested(100000, '\0') + ".";
  EXPECT_THAT(Read(pickle),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("nested deeper than ",
                                              kMaxPickleNesting, " levels"))));
}

TEST(PickleNestingTest, NestingAtTheLimitIsRead) {
  ASSERT_OK_AND_ASSIGN(
      const c10::IValue value,
      Read("\x80\x02" + Nested(kMaxPickleNesting, '\0') + "."));
  int depth = 0;
  for (c10::IValue v = value; !v.isNone(); ++depth) {
    if (v.isList()) {
      v = v.toListRef()[0];
    } else if (v.isGenericDict()) {
      v = v.toGenericDict().at(7);
    } else {
      v = v.toTupleRef().elements()[0];
    }
  }
  EXPECT_EQ(depth, kMaxPickleNesting);
}

TEST(PickleNestingTest, DeepNestingAddedToANestedListIsRejected) {
  // A = [] (memo 1), wrapped 600 times; then 600 more levels are built and
  // appended to A: the outer value is 1201 deep although each step alone
  // nests only 600.
  const std::string pickle =
      "\x80\x02]q\x01" + Wrap(600, '\0') + "h\x01" + Nested(600, '\2') + "a0.";
  // The stack holds the outer value at STOP (the POP drops A). Without the
  // appended levels it is read.
  ASSERT_THAT(Read("\x80\x02]q\x01" + Wrap(600, '\0') + "."), IsOk());
  EXPECT_THAT(Read(pickle),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("nested deeper than ",
                                              kMaxPickleNesting, " levels"))));
}

TEST(PickleNestingTest, ListContainingItselfIsRejected) {
  // L = []; L.append(L).
  EXPECT_THAT(Read(Bytes("\x80\x02]q\x00h\x00"
                         "a.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("contains itself")));
}

TEST(PickleFuzzTest, BadDeviceNameIsAnError) {
  // torch.device("nonsense"): LibTorch throws, the reader returns an error.
  EXPECT_THAT(Read(Bytes("\x80\x02"
                         "ctorch\ndevice\nX\x08\x00\x00\x00nonsense\x85R.")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("at pickle byte")));
}

}  // namespace
}  // namespace strata::serialization
