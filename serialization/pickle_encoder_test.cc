// PickleEncoder's pickles read back by object_pickle (this package's
// reader) and by Python's own pickle.loads (Debian's python3), value for
// value.
#include "serialization/pickle_encoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "base/file_io.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"
#include "serialization/object_pickle.h"
#include "serialization/testing/python_runner.h"

namespace strata::serialization {
namespace {

using Kind = PyValue::Kind;
using ::strata::testing::IsOk;

// [None, True, False, 0, -1, 2**31 - 1, -2**31, 2**31, -2**40,
//  -2**63, 0.1, -2.5e300, '', 'é€😀', (), (1, 'a'), [], [7, 8]]
std::string Scalars() {
  PickleEncoder e;
  e.EmptyList();
  e.Mark();
  e.None();
  e.Bool(true);
  e.Bool(false);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{2147483647},
                    int64_t{-2147483648LL}, int64_t{2147483648LL},
                    -(int64_t{1} << 40), std::numeric_limits<int64_t>::min()}) {
    e.Int(v);
  }
  e.Float(0.1);
  e.Float(-2.5e300);
  e.String("");
  e.String("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  e.EmptyTuple();
  e.Mark();
  e.Int(1);
  e.String("a");
  e.Tuple();
  e.EmptyList();
  e.EmptyList();
  e.Mark();
  e.Int(7);
  e.Int(8);
  e.Appends();
  e.Appends();
  return e.Finish();
}

TEST(PickleEncoderTest, ObjectPickleReadsEveryScalar) {
  ASSERT_OK_AND_ASSIGN(auto objects, ReadObjectPickle(Scalars(), "scalars"));
  const PyValue& root = objects->root();
  ASSERT_EQ(root.kind, Kind::kList);
  ASSERT_EQ(root.items.size(), 18u);
  EXPECT_EQ(root.items[0]->kind, Kind::kNone);
  EXPECT_TRUE(root.items[1]->boolean);
  EXPECT_FALSE(root.items[2]->boolean);
  const int64_t ints[] = {0,
                          -1,
                          2147483647,
                          -2147483648LL,
                          2147483648LL,
                          -(int64_t{1} << 40),
                          std::numeric_limits<int64_t>::min()};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(root.items[3 + i]->kind, Kind::kInt) << i;
    EXPECT_EQ(root.items[3 + i]->integer, ints[i]) << i;
  }
  EXPECT_EQ(root.items[10]->real, 0.1);  // Bitwise: no arithmetic.
  EXPECT_EQ(root.items[11]->real, -2.5e300);
  EXPECT_EQ(root.items[12]->text, "");
  EXPECT_EQ(root.items[13]->text, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(root.items[14]->kind, Kind::kTuple);
  EXPECT_TRUE(root.items[14]->items.empty());
  ASSERT_EQ(root.items[15]->items.size(), 2u);
  EXPECT_EQ(root.items[15]->items[1]->text, "a");
  EXPECT_EQ(root.items[16]->kind, Kind::kList);
  EXPECT_TRUE(root.items[16]->items.empty());
  ASSERT_EQ(root.items[17]->items.size(), 2u);
  EXPECT_EQ(root.items[17]->items[1]->integer, 8);
}

// types.SimpleNamespace(a=1, b={'k': (2, 'v')}) built as pickle builds a
// dataclass: NEWOBJ with no arguments, then BUILD with its __dict__.
std::string Namespace() {
  PickleEncoder e;
  e.Global("types", "SimpleNamespace");
  e.EmptyTuple();
  e.NewObj();
  e.EmptyDict();
  e.Mark();
  e.String("a");
  e.Int(1);
  e.String("b");
  e.EmptyDict();
  e.Mark();
  e.String("k");
  e.Mark();
  e.Int(2);
  e.String("v");
  e.Tuple();
  e.SetItems();
  e.SetItems();
  e.Build();
  return e.Finish();
}

TEST(PickleEncoderTest, ObjectPickleReadsAnObjectWithItsState) {
  ASSERT_OK_AND_ASSIGN(auto objects, ReadObjectPickle(Namespace(), "ns"));
  const PyValue& root = objects->root();
  ASSERT_EQ(root.kind, Kind::kObject);
  EXPECT_EQ(root.text, "types.SimpleNamespace");
  ASSERT_NE(root.state, nullptr);
  ASSERT_NE(root.state->Get("a"), nullptr);
  EXPECT_EQ(root.state->Get("a")->integer, 1);
  const PyValue* b = root.state->Get("b");
  ASSERT_NE(b, nullptr);
  ASSERT_NE(b->Get("k"), nullptr);
  EXPECT_EQ(b->Get("k")->items[1]->text, "v");
}

// A call: REDUCE of a global with its arguments.
TEST(PickleEncoderTest, ObjectPickleReadsACall) {
  PickleEncoder e;
  e.Global("collections", "OrderedDict");
  e.EmptyTuple();
  e.Reduce();
  ASSERT_OK_AND_ASSIGN(auto objects, ReadObjectPickle(e.Finish(), "call"));
  EXPECT_EQ(objects->root().kind, Kind::kObject);
  EXPECT_EQ(objects->root().text, "collections.OrderedDict");
}

// Python's own unpickler: repr() of what it loads is what we wrote.
TEST(PickleEncoderTest, PythonLoadsWhatItWrites) {
  const std::string dir = strata::testing::FreshTempDir("pickle_encoder");
  const std::string scalars = dir + "/scalars.pkl";
  const std::string ns = dir + "/ns.pkl";
  ASSERT_THAT(WriteFileAtomic(scalars, Scalars()), IsOk());
  ASSERT_THAT(WriteFileAtomic(ns, Namespace()), IsOk());
  const std::string script = dir + "/check.py";
  ASSERT_THAT(
      testing::WriteTextFile(
          script,
          "import pickle, sys, types\n"
          "got = pickle.load(open(sys.argv[1], 'rb'))\n"
          "want = [None, True, False, 0, -1, 2**31 - 1, -2**31, 2**31, "
          "-2**40,\n"
          "        -2**63, 0.1, -2.5e300, '', '\\u00e9\\u20ac\\U0001F600', "
          "(),\n"
          "        (1, 'a'), [], [7, 8]]\n"
          "assert got == want, got\n"
          "n = pickle.load(open(sys.argv[2], 'rb'))\n"
          "assert isinstance(n, types.SimpleNamespace), n\n"
          "assert n == types.SimpleNamespace(a=1, b={'k': (2, 'v')}), n\n"),
      IsOk());
  EXPECT_THAT(testing::RunPython({script, scalars, ns}, dir + "/log"), IsOk());
}

}  // namespace
}  // namespace strata::serialization
