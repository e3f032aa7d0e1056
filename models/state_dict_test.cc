#include "models/state_dict.h"

#include <ATen/ATen.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"
#include "serialization/torch_file.h"

namespace strata::models {
namespace {

using ::strata::testing::IsOk;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string TempPath(const std::string& name) { return TempDir() + "/" + name; }

// Parameters "layer.weight" [2, 3], "layer.bias" [2] and a buffer
// "layer.count" [1] (int64), all filled with `fill`.
class Small : public torch::nn::Module {
 public:
  explicit Small(double fill) {
    auto layer =
        register_module("layer", std::make_shared<torch::nn::Module>());
    layer->register_parameter("weight", at::full({2, 3}, fill));
    layer->register_parameter("bias", at::full({2}, fill));
    layer->register_buffer(
        "count", at::full({1}, static_cast<int64_t>(fill), at::kLong));
  }
  at::Tensor Get(const std::string& name) const {
    for (const auto& [key, tensor] : NamedStateTensors(*this)) {
      if (key == name) return tensor;
    }
    return at::Tensor();
  }
};

void WriteDict(const std::string& path, const c10::impl::GenericDict& dict) {
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), bytes.size());
}

c10::impl::GenericDict Dict() {
  return c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
}

// A complete state dict for Small, values `fill`.
c10::impl::GenericDict SmallDict(double fill) {
  c10::impl::GenericDict dict = Dict();
  dict.insert("layer.weight", at::full({2, 3}, fill));
  dict.insert("layer.bias", at::full({2}, fill));
  dict.insert("layer.count",
              at::full({1}, static_cast<int64_t>(fill), at::kLong));
  return dict;
}

bool Unchanged(const Small& model, double fill) {
  return at::equal(model.Get("layer.weight"), at::full({2, 3}, fill)) &&
         at::equal(model.Get("layer.bias"), at::full({2}, fill));
}

TEST(NamedStateTensorsTest, ParametersThenBuffersWithFullNames) {
  std::vector<std::string> names;
  for (const auto& [name, tensor] : NamedStateTensors(Small(1))) {
    names.push_back(name);
  }
  EXPECT_THAT(names, ElementsAre("layer.weight", "layer.bias", "layer.count"));
}

TEST(StateDictTest, SaveThenLoadRoundTrips) {
  const std::string path = TempPath("round_trip.pt");
  ASSERT_THAT(SaveStateDict(Small(3), path), IsOk());
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, /*strict=*/true);
  ASSERT_THAT(status, IsOk());
  EXPECT_TRUE(Unchanged(model, 3));
  EXPECT_EQ(model.Get("layer.count").item<int64_t>(), 3);
}

TEST(StateDictTest, SavedFileIsADictOfContiguousCpuTensors) {
  // "w" is a transposed view into a larger buffer (like a flat parameter):
  // it must be saved compactly, with its own storage.
  const at::Tensor flat = at::arange(12, at::kFloat);
  torch::nn::Module model;
  model.register_parameter("w", flat.narrow(0, 6, 6).view({2, 3}).t());
  const std::string path = TempPath("dict.pt");
  ASSERT_THAT(SaveStateDict(model, path), IsOk());
  absl::StatusOr<c10::IValue> value = serialization::ReadTorchFile(path);
  ASSERT_THAT(value, IsOk());
  ASSERT_TRUE(value->isGenericDict());
  ASSERT_EQ(value->toGenericDict().size(), 1);
  const at::Tensor w = value->toGenericDict().at("w").toTensor();
  EXPECT_TRUE(w.is_contiguous());
  EXPECT_FALSE(w.requires_grad());
  EXPECT_EQ(w.storage().nbytes(), 6 * sizeof(float));
  EXPECT_TRUE(at::equal(w, flat.narrow(0, 6, 6).view({2, 3}).t()));
}

TEST(StateDictTest, SaveReplacesAtomicallyAndLeavesNoTemporaries) {
  const std::string dir = TempPath("atomic");
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  const std::string path = dir + "/model.pt";
  ASSERT_THAT(SaveStateDict(Small(1), path), IsOk());
  ASSERT_THAT(SaveStateDict(Small(5), path), IsOk());
  std::vector<std::string> files;
  DIR* listing = opendir(dir.c_str());
  ASSERT_NE(listing, nullptr);
  while (dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") files.push_back(name);
  }
  closedir(listing);
  EXPECT_THAT(files, ElementsAre("model.pt"));
  Small model(0);
  ASSERT_THAT(LoadStateDict(model, path, true), IsOk());
  EXPECT_TRUE(Unchanged(model, 5));
}

TEST(StateDictTest, SaveIntoMissingDirectoryNamesThePath) {
  const std::string path = TempPath("no/such/dir/model.pt");
  const absl::Status status = SaveStateDict(Small(1), path);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(StateDictTest, SavingAMetaParameterNamesIt) {
  torch::nn::Module model;
  model.register_parameter(
      "w", at::empty({2}, at::TensorOptions().device(at::kMeta)));
  const absl::Status status = SaveStateDict(model, TempPath("meta.pt"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'w'"));
}

TEST(StateDictTest, LoadMissingFileIsNotFound) {
  Small model(0);
  const absl::Status status =
      LoadStateDict(model, TempPath("missing.pt"), true);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("missing.pt"));
}

TEST(StateDictTest, LoadNonPyTorchFileSaysSo) {
  const std::string path = TempPath("text.pt");
  std::ofstream(path) << "hello";
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not a PyTorch file"));
}

TEST(StateDictTest, StrictListsMissingKeysAndChangesNothing) {
  c10::impl::GenericDict dict = SmallDict(4);
  ASSERT_EQ(dict.erase("layer.bias"), 1);
  ASSERT_EQ(dict.erase("layer.count"), 1);
  const std::string path = TempPath("missing_keys.pt");
  WriteDict(path, dict);
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("2 missing key(s): 'layer.bias', 'layer.count'"));
  EXPECT_TRUE(Unchanged(model, 0));
}

TEST(StateDictTest, StrictListsUnexpectedKeys) {
  c10::impl::GenericDict dict = SmallDict(4);
  dict.insert("extra.weight", at::ones({1}));
  const std::string path = TempPath("unexpected_keys.pt");
  WriteDict(path, dict);
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, true);
  EXPECT_THAT(status.message(),
              HasSubstr("1 unexpected key(s): 'extra.weight'"));
  EXPECT_TRUE(Unchanged(model, 0));
}

TEST(StateDictTest, NonStrictIgnoresMissingAndUnexpectedKeys) {
  c10::impl::GenericDict dict = Dict();
  dict.insert("layer.weight", at::full({2, 3}, 4.0));
  dict.insert("extra.weight", at::ones({1}));
  const std::string path = TempPath("non_strict.pt");
  WriteDict(path, dict);
  Small model(0);
  ASSERT_THAT(LoadStateDict(model, path, false), IsOk());
  EXPECT_TRUE(at::equal(model.Get("layer.weight"), at::full({2, 3}, 4.0)));
  EXPECT_TRUE(at::equal(model.Get("layer.bias"), at::zeros({2})));
}

TEST(StateDictTest, ShapeMismatchNamesKeyAndShapesAndChangesNothing) {
  c10::impl::GenericDict dict = SmallDict(4);
  dict.insert_or_assign("layer.bias", at::ones({3}));
  const std::string path = TempPath("bad_shape.pt");
  WriteDict(path, dict);
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, /*strict=*/false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("'layer.bias': file has shape [3], model expects [2]"));
  // layer.weight was fine, but nothing is loaded.
  EXPECT_TRUE(Unchanged(model, 0));
}

TEST(StateDictTest, ConvertsDtypeToTheParameters) {
  c10::impl::GenericDict dict = SmallDict(0);
  dict.insert_or_assign("layer.weight", at::full({2, 3}, 1.5, at::kDouble));
  dict.insert_or_assign("layer.bias", at::full({2}, 2.5, at::kBFloat16));
  const std::string path = TempPath("dtypes.pt");
  WriteDict(path, dict);
  Small model(0);
  ASSERT_THAT(LoadStateDict(model, path, true), IsOk());
  EXPECT_EQ(model.Get("layer.weight").scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(model.Get("layer.weight"), at::full({2, 3}, 1.5)));
  EXPECT_TRUE(at::equal(model.Get("layer.bias"), at::full({2}, 2.5)));
}

TEST(StateDictTest, NonTensorValueIsNamed) {
  c10::impl::GenericDict dict = SmallDict(0);
  dict.insert("meta", std::string("hello"));
  const std::string path = TempPath("non_tensor.pt");
  WriteDict(path, dict);
  Small model(0);
  const absl::Status status = LoadStateDict(model, path, true);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'meta'"));
}

TEST(StateDictTest, LoadIntoMetaParametersMaterialisesThem) {
  torch::nn::Module model;
  const at::Tensor w = model.register_parameter(
      "w", at::empty({2, 2}, at::TensorOptions().device(at::kMeta)));
  c10::impl::GenericDict dict = Dict();
  dict.insert("w", at::full({2, 2}, 7.0));
  const std::string path = TempPath("meta_load.pt");
  WriteDict(path, dict);
  ASSERT_THAT(LoadStateDict(model, path, true), IsOk());
  EXPECT_FALSE(w.is_meta());
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(at::equal(w, at::full({2, 2}, 7.0)));
}

}  // namespace
}  // namespace strata::models
