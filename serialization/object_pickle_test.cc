// ReadObjectPickle over pickles Python 3.11 wrote (the bytes below, from
// pickle.dumps of the value in each comment), and its refusals.
#include "serialization/object_pickle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/testing/status_matchers.h"

namespace strata::serialization {
namespace {

using Kind = PyValue::Kind;
using ::strata::testing::StatusIs;
using ::testing::HasSubstr;

std::string Bytes(const char* data, size_t size) {
  return std::string(data, size);
}
#define PICKLE(literal) Bytes(literal, sizeof(literal) - 1)

// {'a': [1, -2, 2.5, None, True, 70000, -(2**40)], 'b': (b'xy', 'z')}
const std::string kPlain2 = PICKLE(
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28"
    "\x4b\x01\x4a\xfe\xff\xff\xff\x47\x40\x04\x00\x00\x00\x00\x00\x00\x4e\x88"
    "\x4a\x70\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\xff\x65\x58\x01\x00\x00"
    "\x00\x62\x71\x03\x63\x5f\x63\x6f\x64\x65\x63\x73\x0a\x65\x6e\x63\x6f\x64"
    "\x65\x0a\x71\x04\x58\x02\x00\x00\x00\x78\x79\x71\x05\x58\x06\x00\x00\x00"
    "\x6c\x61\x74\x69\x6e\x31\x71\x06\x86\x71\x07\x52\x71\x08\x58\x01\x00\x00"
    "\x00\x7a\x71\x09\x86\x71\x0a\x75\x2e");
const std::string kPlain4 = PICKLE(
    "\x80\x04\x95\x3b\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94"
    "\x5d\x94\x28\x4b\x01\x4a\xfe\xff\xff\xff\x47\x40\x04\x00\x00\x00\x00\x00"
    "\x00\x4e\x88\x4a\x70\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\xff\x65\x8c"
    "\x01\x62\x94\x43\x02\x78\x79\x94\x8c\x01\x7a\x94\x86\x94\x75\x2e");
// {Key('w', (0, 4)): Info('__0_0.distcp', 12), 'e': Color.RED} with
// Key a frozen dataclass (fqn, offset), Info a dataclass (path, length),
// Color an Enum; all in __main__.
const std::string kObjects = PICKLE(
    "\x80\x04\x95\x83\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x08\x5f\x5f"
    "\x6d\x61\x69\x6e\x5f\x5f\x94\x8c\x03\x4b\x65\x79\x94\x93\x94\x29\x81\x94"
    "\x7d\x94\x28\x8c\x03\x66\x71\x6e\x94\x8c\x01\x77\x94\x8c\x06\x6f\x66\x66"
    "\x73\x65\x74\x94\x4b\x00\x4b\x04\x86\x94\x75\x62\x68\x01\x8c\x04\x49\x6e"
    "\x66\x6f\x94\x93\x94\x29\x81\x94\x7d\x94\x28\x8c\x04\x70\x61\x74\x68\x94"
    "\x8c\x0c\x5f\x5f\x30\x5f\x30\x2e\x64\x69\x73\x74\x63\x70\x94\x8c\x06\x6c"
    "\x65\x6e\x67\x74\x68\x94\x4b\x0c\x75\x62\x8c\x01\x65\x94\x68\x01\x8c\x05"
    "\x43\x6f\x6c\x6f\x72\x94\x93\x94\x4b\x01\x85\x94\x52\x94\x75\x2e");
// l = []; l.append(l)
const std::string kCycle = PICKLE(
    "\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x68\x00\x61\x2e");

void ExpectPlain(const PyValue& root, bool protocol2) {
  ASSERT_EQ(root.kind, Kind::kDict);
  ASSERT_EQ(root.items.size(), 4u);
  const PyValue* a = root.Get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->kind, Kind::kList);
  ASSERT_EQ(a->items.size(), 7u);
  EXPECT_EQ(a->items[0]->integer, 1);
  EXPECT_EQ(a->items[1]->integer, -2);
  EXPECT_EQ(a->items[2]->kind, Kind::kFloat);
  EXPECT_EQ(a->items[2]->real, 2.5);
  EXPECT_EQ(a->items[3]->kind, Kind::kNone);
  EXPECT_EQ(a->items[4]->kind, Kind::kBool);
  EXPECT_TRUE(a->items[4]->boolean);
  EXPECT_EQ(a->items[5]->integer, 70000);
  EXPECT_EQ(a->items[6]->integer, -(int64_t{1} << 40));
  const PyValue* b = root.Get("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->kind, Kind::kTuple);
  ASSERT_EQ(b->items.size(), 2u);
  if (protocol2) {
    // Protocol 2 has no bytes opcode: _codecs.encode('xy', 'latin1').
    EXPECT_EQ(b->items[0]->kind, Kind::kObject);
    EXPECT_EQ(b->items[0]->text, "_codecs.encode");
    EXPECT_EQ(b->items[0]->args->items[0]->text, "xy");
  } else {
    EXPECT_EQ(b->items[0]->kind, Kind::kBytes);
    EXPECT_EQ(b->items[0]->text, "xy");
  }
  EXPECT_EQ(b->items[1]->kind, Kind::kStr);
  EXPECT_EQ(b->items[1]->text, "z");
  EXPECT_EQ(root.Get("c"), nullptr);
}

TEST(ObjectPickleTest, ReadsPlainDataOfProtocols2And4) {
  ASSERT_OK_AND_ASSIGN(auto p2, ReadObjectPickle(kPlain2, "p2"));
  ExpectPlain(p2->root(), /*protocol2=*/true);
  ASSERT_OK_AND_ASSIGN(auto p4, ReadObjectPickle(kPlain4, "p4"));
  ExpectPlain(p4->root(), /*protocol2=*/false);
}

TEST(ObjectPickleTest, KeepsObjectsAsClassArgumentsAndState) {
  ASSERT_OK_AND_ASSIGN(auto objects, ReadObjectPickle(kObjects, "objects"));
  const PyValue& root = objects->root();
  ASSERT_EQ(root.kind, Kind::kDict);
  ASSERT_EQ(root.items.size(), 4u);
  // An object as a dict key (a frozen dataclass), with its state.
  const PyValue& key = *root.items[0];
  ASSERT_EQ(key.kind, Kind::kObject);
  EXPECT_EQ(key.text, "__main__.Key");
  ASSERT_NE(key.args, nullptr);
  EXPECT_TRUE(key.args->items.empty());
  ASSERT_NE(key.state, nullptr);
  EXPECT_EQ(key.state->Get("fqn")->text, "w");
  const PyValue* offset = key.state->Get("offset");
  ASSERT_EQ(offset->kind, Kind::kTuple);
  EXPECT_EQ(offset->items[1]->integer, 4);
  const PyValue& info = *root.items[1];
  EXPECT_EQ(info.text, "__main__.Info");
  EXPECT_EQ(info.state->Get("path")->text, "__0_0.distcp");
  EXPECT_EQ(info.state->Get("length")->integer, 12);
  // An enum member: its class called with its value, no state.
  const PyValue* color = root.Get("e");
  ASSERT_EQ(color->kind, Kind::kObject);
  EXPECT_EQ(color->text, "__main__.Color");
  EXPECT_EQ(color->args->items[0]->integer, 1);
  EXPECT_EQ(color->state, nullptr);
}

TEST(ObjectPickleTest, ReadsAListThatContainsItself) {
  ASSERT_OK_AND_ASSIGN(auto objects, ReadObjectPickle(kCycle, "cycle"));
  const PyValue& root = objects->root();
  ASSERT_EQ(root.kind, Kind::kList);
  ASSERT_EQ(root.items.size(), 1u);
  EXPECT_EQ(root.items[0], &root);
}

TEST(ObjectPickleTest, RefusesWhatItCannotRead) {
  // Every truncation of a valid pickle.
  for (size_t n = 0; n < kObjects.size(); ++n) {
    EXPECT_THAT(
        ReadObjectPickle(kObjects.substr(0, n), "cut").status(),
        StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cut: ")))
        << n;
  }
  // A persistent id (torch.save's tensors; not plain data).
  EXPECT_THAT(
      ReadObjectPickle(PICKLE("\x80\x04\x8c\x01\x30\x51\x2e"), "pid").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("unsupported pickle opcode 0x51")));
  EXPECT_THAT(ReadObjectPickle(PICKLE("\x80\x06\x4e\x2e"), "p6").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unsupported pickle protocol 6")));
  // BUILD of a dict (not an object), and two values left at STOP.
  EXPECT_THAT(
      ReadObjectPickle(PICKLE("\x80\x04\x7d\x7d\x62\x2e"), "build").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("cannot restore the state of dict")));
  EXPECT_THAT(ReadObjectPickle(PICKLE("\x80\x04\x4e\x4e\x2e"), "two").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 values and 0 marks left at STOP")));
  // A call of something that is not a global.
  EXPECT_THAT(
      ReadObjectPickle(PICKLE("\x80\x04\x4e\x29\x52\x2e"), "call").status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("call of None with tuple")));
}

}  // namespace
}  // namespace strata::serialization
