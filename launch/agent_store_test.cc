#include "launch/agent_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/status_matchers.h"
#include "launch/fds.h"

namespace strata::launch {
namespace {

using ::strata::testing::IsOk;
using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(5);

struct ServedStore {
  int port = 0;
  std::unique_ptr<AgentStoreServer> server;
  std::unique_ptr<AgentStoreClient> client;
};

ServedStore Serve() {
  ServedStore store;
  absl::StatusOr<int> port = PickFreeTcpPort();
  EXPECT_THAT(port.status(), IsOk());
  if (!port.ok()) return store;
  store.port = *port;
  absl::StatusOr<std::unique_ptr<AgentStoreServer>> server =
      AgentStoreServer::Start(*port);
  EXPECT_THAT(server.status(), IsOk());
  if (!server.ok()) return store;
  store.server = *std::move(server);
  absl::StatusOr<std::unique_ptr<AgentStoreClient>> client =
      AgentStoreClient::Connect("127.0.0.1", *port, kTimeout);
  EXPECT_THAT(client.status(), IsOk());
  if (client.ok()) store.client = *std::move(client);
  return store;
}

TEST(AgentStoreTest, AddCountsFromZeroAcrossClients) {
  ServedStore store = Serve();
  ASSERT_NE(store.client, nullptr);
  absl::StatusOr<std::unique_ptr<AgentStoreClient>> other =
      AgentStoreClient::Connect("localhost", store.port, kTimeout);
  ASSERT_THAT(other.status(), IsOk());
  EXPECT_EQ(*store.client->Add("joined", 1), 1);
  EXPECT_EQ(*(*other)->Add("joined", 1), 2);
  EXPECT_EQ(*store.client->Add("joined", 0), 2);
  EXPECT_EQ(*(*other)->Add("other", -3), -3);
}

TEST(AgentStoreTest, GetReturnsWhatSetStoredAndNothingForAMissingKey) {
  ServedStore store = Serve();
  ASSERT_NE(store.client, nullptr);
  EXPECT_EQ(*store.client->Get("failure"), std::nullopt);
  ASSERT_THAT(store.client->Set("failure", "R 137 node 1 rank 3 failed"),
              IsOk());
  EXPECT_EQ(*store.client->Get("failure"),
            std::optional<std::string>("R 137 node 1 rank 3 failed"));
  // A newline in a value would end the request; it becomes a space.
  ASSERT_THAT(store.client->Set("two_lines", "a\nb"), IsOk());
  EXPECT_EQ(*store.client->Get("two_lines"), std::optional<std::string>("a b"));
}

TEST(AgentStoreTest, AddingToATextIsAnErrorNamingIt) {
  ServedStore store = Serve();
  ASSERT_NE(store.client, nullptr);
  ASSERT_THAT(store.client->Set("text", "abc"), IsOk());
  const absl::StatusOr<int64_t> added = store.client->Add("text", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(added.status().message(), HasSubstr("'abc'"));
}

TEST(AgentStoreTest, CallsFailOnceTheServerIsGone) {
  ServedStore store = Serve();
  ASSERT_NE(store.client, nullptr);
  store.server.reset();
  const absl::StatusOr<int64_t> added = store.client->Add("joined", 1);
  EXPECT_EQ(added.status().code(), absl::StatusCode::kUnavailable)
      << added.status();
}

TEST(AgentStoreTest, ConnectingWithNoServerFailsAfterTheTimeout) {
  absl::StatusOr<int> port = PickFreeTcpPort();
  ASSERT_THAT(port.status(), IsOk());
  const absl::Time start = absl::Now();
  const absl::StatusOr<std::unique_ptr<AgentStoreClient>> client =
      AgentStoreClient::Connect("127.0.0.1", *port, absl::Milliseconds(300));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("cannot connect to 127.0.0.1:", *port,
                                     " within 300ms")));
  // Retries every 100 ms until the 300 ms deadline; 5 s is slack for load.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(AgentStoreTest, ASecondServerOnTheSamePortIsRefused) {
  ServedStore store = Serve();
  ASSERT_NE(store.server, nullptr);
  const absl::StatusOr<std::unique_ptr<AgentStoreServer>> second =
      AgentStoreServer::Start(store.port);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on port ", store.port)));
}

}  // namespace
}  // namespace strata::launch
