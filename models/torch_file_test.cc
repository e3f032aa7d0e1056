#include "models/torch_file.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "models/python_runner.h"

namespace strata::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void WriteBytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(bytes.data(), bytes.size());
}

std::vector<std::string> Keys(const c10::IValue& dict) {
  std::vector<std::string> keys;
  for (const auto& entry : dict.toGenericDict()) {
    keys.push_back(entry.key().toStringRef());
  }
  return keys;
}

at::Tensor Get(const c10::IValue& dict, const std::string& key) {
  return dict.toGenericDict().at(key).toTensor();
}

// Runs a Python snippet (with torch, nn, OrderedDict imported and `out`
// the output path) that saves something to `out`; returns the path.
std::string SaveFromPython(const std::string& name, const std::string& code) {
  const std::string script = TempPath(name + ".py");
  const std::string out = TempPath(name + ".pt");
  EXPECT_TRUE(WriteTextFile(script,
                            "import sys, torch\n"
                            "from torch import nn\n"
                            "from collections import OrderedDict\n"
                            "out = sys.argv[1]\n" +
                                code)
                  .ok());
  const absl::Status status = RunPython({script, out}, TempPath(name + ".log"));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(ReadTorchFileTest, ReadsPickleSaveDict) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("a", at::arange(6, at::kFloat).view({2, 3}));
  dict.insert("b", at::tensor({7, 8}, at::kLong));
  const std::string path = TempPath("pickle_save.pt");
  WriteBytes(path, torch::pickle_save(c10::IValue(dict)));
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Keys(*value), ElementsAre("a", "b"));
  EXPECT_TRUE(
      at::equal(Get(*value, "a"), at::arange(6, at::kFloat).view({2, 3})));
  EXPECT_TRUE(at::equal(Get(*value, "b"), at::tensor({7, 8}, at::kLong)));
}

TEST(ReadTorchFileTest, ReadsPickleSaveContainersAndScalars) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("step", int64_t{-123456789012});
  dict.insert("lr", 0.25);
  dict.insert("name", std::string("gpt"));
  dict.insert("flag", true);
  dict.insert("none", c10::IValue());
  dict.insert("list", c10::List<int64_t>({1, 2, 3}));
  dict.insert("tuple",
              c10::ivalue::Tuple::create({c10::IValue(1), c10::IValue(2.5)}));
  const std::string path = TempPath("containers.pt");
  WriteBytes(path, torch::pickle_save(c10::IValue(dict)));
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  const auto read = value->toGenericDict();
  EXPECT_EQ(read.at("step").toInt(), -123456789012);
  EXPECT_EQ(read.at("lr").toDouble(), 0.25);
  EXPECT_EQ(read.at("name").toStringRef(), "gpt");
  EXPECT_TRUE(read.at("flag").toBool());
  EXPECT_TRUE(read.at("none").isNone());
  EXPECT_EQ(read.at("list").toListRef().size(), 3);
  EXPECT_EQ(read.at("list").toListRef()[2].toInt(), 3);
  EXPECT_EQ(read.at("tuple").toTupleRef().elements()[1].toDouble(), 2.5);
}

TEST(ReadTorchFileTest, ReadsPythonStateDictOrderedDict) {
  // What torch::pickle_load turns into None: an OrderedDict with _metadata.
  const std::string path = SaveFromPython("state_dict", R"(
m = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
with torch.no_grad():
    for i, p in enumerate(m.parameters()):
        p.copy_(torch.arange(p.numel(), dtype=torch.float32).view_as(p) + i)
torch.save(m.state_dict(), out)
)");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_THAT(Keys(*value),
              ElementsAre("0.weight", "0.bias", "1.weight", "1.bias"));
  EXPECT_TRUE(at::equal(Get(*value, "0.weight"),
                        at::arange(6, at::kFloat).view({2, 3})));
  EXPECT_TRUE(at::equal(Get(*value, "1.bias"), at::arange(2, at::kFloat) + 3));
}

TEST(ReadTorchFileTest, ReadsDtypesViewsAndParameters) {
  const std::string path = SaveFromPython("dtypes", R"(
base = torch.arange(12, dtype=torch.float32)
torch.save({
    "bf16": torch.arange(4).to(torch.bfloat16),
    "f16": torch.arange(4).to(torch.float16),
    "f64": torch.arange(4).to(torch.float64),
    "i32": torch.arange(4).to(torch.int32),
    "bool": torch.tensor([True, False]),
    "param": nn.Parameter(torch.ones(2)),
    "base": base,
    "view": base[2:8].view(2, 3),
    "transposed": base.view(3, 4).t(),
    "scalar": torch.tensor(5.0),
}, out)
)");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(Get(*value, "bf16").scalar_type(), at::kBFloat16);
  EXPECT_TRUE(
      at::equal(Get(*value, "bf16").to(at::kFloat), at::arange(4, at::kFloat)));
  EXPECT_EQ(Get(*value, "f16").scalar_type(), at::kHalf);
  EXPECT_EQ(Get(*value, "f64").scalar_type(), at::kDouble);
  EXPECT_EQ(Get(*value, "i32").scalar_type(), at::kInt);
  EXPECT_EQ(Get(*value, "bool").scalar_type(), at::kBool);
  EXPECT_TRUE(at::equal(Get(*value, "param"), at::ones({2})));
  const at::Tensor base = Get(*value, "base");
  EXPECT_TRUE(
      at::equal(Get(*value, "view"), base.narrow(0, 2, 6).view({2, 3})));
  EXPECT_TRUE(at::equal(Get(*value, "transposed"), base.view({3, 4}).t()));
  EXPECT_EQ(Get(*value, "scalar").dim(), 0);
  EXPECT_EQ(Get(*value, "scalar").item<float>(), 5.0f);
}

TEST(ReadTorchFileTest, TensorsSharingAStorageStillShareIt) {
  const std::string path = SaveFromPython("shared", R"(
base = torch.arange(6, dtype=torch.float32)
torch.save({"a": base, "b": base[2:]}, out)
)");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  Get(*value, "a").fill_(1.0);
  EXPECT_TRUE(at::equal(Get(*value, "b"), at::ones({4})));
}

TEST(ReadTorchFileTest, ReadsPickleProtocol4) {
  const std::string path = SaveFromPython("protocol4", R"(
torch.save(OrderedDict([("w", torch.ones(2, 2)), ("n", 3)]), out,
           pickle_protocol=4)
)");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_TRUE(at::equal(Get(*value, "w"), at::ones({2, 2})));
  EXPECT_EQ(value->toGenericDict().at("n").toInt(), 3);
}

TEST(ReadTorchFileTest, UnsupportedPythonObjectIsNamed) {
  const std::string path =
      SaveFromPython("set", "torch.save({'s': {1, 2}}, out)\n");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("builtins.set"));
  EXPECT_THAT(value.status().message(), HasSubstr(path));
}

TEST(ReadTorchFileTest, LegacyFormatIsNotAPyTorchZipFile) {
  const std::string path =
      SaveFromPython("legacy",
                     "torch.save({'w': torch.ones(2)}, out, "
                     "_use_new_zipfile_serialization=False)\n");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("not a PyTorch file"));
}

TEST(ReadTorchFileTest, MissingFileIsNotFound) {
  const std::string path = TempPath("does_not_exist.pt");
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr(path));
}

TEST(ReadTorchFileTest, DirectoryIsRejected) {
  absl::StatusOr<c10::IValue> value = ReadTorchFile(TempPath(""));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("is a directory"));
}

TEST(ReadTorchFileTest, GarbageIsNotAPyTorchFile) {
  const std::string path = TempPath("garbage.pt");
  WriteBytes(path, std::vector<char>(1000, 'x'));
  absl::StatusOr<c10::IValue> value = ReadTorchFile(path);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("not a PyTorch file"));
}

TEST(ReadTorchFileTest, TruncatedFileIsAnErrorNotACrash) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("a", at::ones({1000}));
  std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  bytes.resize(bytes.size() / 2);
  const std::string path = TempPath("truncated.pt");
  WriteBytes(path, bytes);
  EXPECT_FALSE(ReadTorchFile(path).ok());
}

}  // namespace
}  // namespace strata::models
