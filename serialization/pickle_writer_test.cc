#include "serialization/pickle_writer.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "base/testing/status_matchers.h"
#include "serialization/pickle_reader.h"

namespace strata::serialization {
namespace {

using ::strata::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Reads `pickled` back, its storages from memory (copies, as from a file);
// counts the loads per key.
absl::StatusOr<c10::IValue> ReadBack(const Pickled& pickled,
                                     std::map<std::string, int>* loads) {
  return ReadPickle(pickled.data, "memory",
                    [&](const std::string& key, at::ScalarType dtype,
                        int64_t numel) -> absl::StatusOr<at::Tensor> {
                      ++(*loads)[key];
                      const at::Tensor& source =
                          pickled.tensors.at(std::stoul(key));
                      const absl::string_view bytes = StorageBytes(source);
                      at::Tensor out = at::empty({numel}, dtype);
                      EXPECT_EQ(bytes.size(), out.nbytes());
                      std::memcpy(out.data_ptr(), bytes.data(), bytes.size());
                      return out;
                    });
}

TEST(PickleTest, ScalarsAndContainersRoundTrip) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("step", int64_t{-123456789012});
  dict.insert("lr", 0.25);
  dict.insert("name", std::string("gpt"));
  dict.insert("flag", true);
  dict.insert("none", c10::IValue());
  dict.insert("list", c10::List<int64_t>({1, 2, 3}));
  ASSERT_OK_AND_ASSIGN(const Pickled pickled, Pickle(dict));
  EXPECT_TRUE(pickled.tensors.empty());
  std::map<std::string, int> loads;
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, ReadBack(pickled, &loads));
  const auto read = value.toGenericDict();
  EXPECT_EQ(read.at("step").toInt(), -123456789012);
  EXPECT_EQ(read.at("lr").toDouble(), 0.25);
  EXPECT_EQ(read.at("name").toStringRef(), "gpt");
  EXPECT_TRUE(read.at("flag").toBool());
  EXPECT_TRUE(read.at("none").isNone());
  ASSERT_EQ(read.at("list").toListRef().size(), 3);
  EXPECT_EQ(read.at("list").toListRef()[1].toInt(), 2);
}

// torch.load(weights_only=True) (PyTorch 2.6's default) refuses the
// torch.jit._pickle globals LibTorch's pickler uses for typed containers
// (restore_type_tag, build_intlist, ...): none may appear, whatever the
// containers' static types, and the values still round trip.
TEST(PickleTest, TypedContainersAreWrittenWithoutTorchJitGlobals) {
  c10::Dict<std::string, at::Tensor> tensors;
  tensors.insert("w", at::ones({2}));
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("tensors", tensors);
  dict.insert("ints", c10::List<int64_t>({4, 5}));
  dict.insert("doubles", c10::List<double>({0.5}));
  dict.insert("bools", c10::List<bool>({true, false}));
  dict.insert("tensor_list", c10::List<at::Tensor>({at::zeros({1})}));
  dict.insert("tuple",
              c10::ivalue::Tuple::create({c10::List<int64_t>({7}), 1.5}));
  ASSERT_OK_AND_ASSIGN(const Pickled pickled, Pickle(dict));
  EXPECT_THAT(pickled.data, ::testing::Not(HasSubstr("torch.jit")));
  std::map<std::string, int> loads;
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, ReadBack(pickled, &loads));
  const auto read = value.toGenericDict();
  EXPECT_TRUE(at::equal(read.at("tensors").toGenericDict().at("w").toTensor(),
                        at::ones({2})));
  const c10::IValue ints_value = read.at("ints");
  const auto& ints = ints_value.toListRef();
  ASSERT_EQ(ints.size(), 2u);
  EXPECT_EQ(ints[1].toInt(), 5);
  EXPECT_EQ(read.at("doubles").toListRef()[0].toDouble(), 0.5);
  EXPECT_FALSE(read.at("bools").toListRef()[1].toBool());
  EXPECT_TRUE(at::equal(read.at("tensor_list").toListRef()[0].toTensor(),
                        at::zeros({1})));
  const c10::IValue tuple_value = read.at("tuple");
  const auto& tuple = tuple_value.toTupleRef().elements();
  ASSERT_EQ(tuple.size(), 2u);
  EXPECT_EQ(tuple[0].toListRef()[0].toInt(), 7);
  EXPECT_EQ(tuple[1].toDouble(), 1.5);
}

TEST(PickleTest, TensorsRoundTripOneRecordPerStorage) {
  const at::Tensor base = at::arange(12, at::kFloat);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("base", base);
  dict.insert("view", base.narrow(0, 2, 6).view({2, 3}));
  dict.insert("ids", at::tensor({4, 5}, at::kLong));
  ASSERT_OK_AND_ASSIGN(const Pickled pickled, Pickle(dict));
  // base and view share a storage: two records.
  ASSERT_EQ(pickled.tensors.size(), 2);
  std::map<std::string, int> loads;
  ASSERT_OK_AND_ASSIGN(const c10::IValue value, ReadBack(pickled, &loads));
  EXPECT_EQ(loads, (std::map<std::string, int>{{"0", 1}, {"1", 1}}));
  const auto read = value.toGenericDict();
  EXPECT_TRUE(at::equal(read.at("base").toTensor(), base));
  EXPECT_TRUE(
      at::equal(read.at("view").toTensor(), base.narrow(0, 2, 6).view({2, 3})));
  EXPECT_TRUE(at::equal(read.at("ids").toTensor(), at::tensor({4, 5})));
  // Read back, they share their storage again.
  read.at("base").toTensor().fill_(1);
  EXPECT_TRUE(at::equal(read.at("view").toTensor(), at::ones({2, 3})));
}

TEST(PickleTest, StorageBytesAreTheWholeStorage) {
  const at::Tensor base = at::arange(8, at::kInt);
  EXPECT_EQ(StorageBytes(base.narrow(0, 2, 3)).size(), 8 * sizeof(int32_t));
}

TEST(PickleTest, StorageLoaderErrorKeepsItsCodeAndGainsWhere) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", at::ones({4}));
  ASSERT_OK_AND_ASSIGN(const Pickled pickled, Pickle(dict));
  EXPECT_THAT(
      ReadPickle(pickled.data, "file.pt",
                 [](const std::string&, at::ScalarType,
                    int64_t) -> absl::StatusOr<at::Tensor> {
                   return absl::NotFoundError("no record data/0");
                 }),
      StatusIs(absl::StatusCode::kNotFound,
               AllOf(HasSubstr("file.pt: "), HasSubstr("no record data/0"))));
}

TEST(PickleTest, StorageOfTheWrongSizeIsRejected) {
  c10::Dict<std::string, at::Tensor> dict;
  dict.insert("w", at::ones({4}));
  ASSERT_OK_AND_ASSIGN(const Pickled pickled, Pickle(dict));
  EXPECT_THAT(ReadPickle(pickled.data, "file.pt",
                         [](const std::string&, at::ScalarType dtype,
                            int64_t numel) -> absl::StatusOr<at::Tensor> {
                           return at::zeros({numel - 1}, dtype);
                         }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("storage '0' of 4 Float elements")));
}

}  // namespace
}  // namespace strata::serialization
