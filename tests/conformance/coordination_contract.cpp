#include "conformance/coordination_contract.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "fleetcron/rfc3339.h"
#include "support/eventually.h"
#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

std::string future_fire_key(const std::string& job, int second) {
  static const Instant base = std::chrono::floor<std::chrono::hours>(real_now()) + std::chrono::hours{2};
  return fire_key(job, base + std::chrono::seconds{second});
}

namespace {

bool leads(Elector& elector) { return elector.is_leader().status == Leadership::Status::leader; }

}  // namespace

TEST_P(CoordinationContract, AFireIsClaimedOnceAcrossReplicas) {
  auto fleet = GetParam().make(false);
  auto a = fleet->claimer(), b = fleet->claimer();
  const std::string key = future_fire_key("once", 1);
  const ClaimResult first = a->claim(key);
  ASSERT_EQ(first.status, ClaimResult::Status::claimed) << first.error;
  EXPECT_GT(first.fence, 0u);
  EXPECT_EQ(b->claim(key).status, ClaimResult::Status::already_claimed);
  EXPECT_EQ(a->claim(key).status, ClaimResult::Status::already_claimed);  // not twice by the same replica either
}

TEST_P(CoordinationContract, FencesIncreaseAcrossReplicas) {
  auto fleet = GetParam().make(false);
  std::vector<std::shared_ptr<Claimer>> replicas{fleet->claimer(), fleet->claimer()};
  std::uint64_t previous = 0;
  for (int i = 0; i < 20; ++i) {
    const ClaimResult claim = replicas[static_cast<std::size_t>(i % 2)]->claim(future_fire_key("fences", i));
    ASSERT_EQ(claim.status, ClaimResult::Status::claimed) << claim.error;
    EXPECT_GT(claim.fence, previous) << "claim " << i;
    previous = claim.fence;
  }
}

TEST_P(CoordinationContract, ABatchAnswersEveryKeyInOrder) {
  auto fleet = GetParam().make(false);
  auto a = fleet->claimer(), b = fleet->claimer();
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back(future_fire_key("batch", i));
  for (int i = 0; i < 50; i += 2) ASSERT_EQ(b->claim(keys[static_cast<std::size_t>(i)]).status, ClaimResult::Status::claimed);
  const std::vector<ClaimResult> results = a->claim_batch(keys);
  ASSERT_EQ(results.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(results[i].status, i % 2 == 0 ? ClaimResult::Status::already_claimed : ClaimResult::Status::claimed)
        << keys[i] << ": " << results[i].error;
  }
}

TEST_P(CoordinationContract, ThreeReplicasClaimEachFireExactlyOnce) {
  auto fleet = GetParam().make(false);
  constexpr int fires = 300;
  std::vector<std::string> keys;
  for (int i = 0; i < fires; ++i) keys.push_back(future_fire_key("three", i));
  std::mutex mutex;
  std::map<std::string, int> winners;  // key -> replica
  std::set<std::uint64_t> fences;
  std::vector<std::thread> threads;
  for (int replica = 0; replica < 3; ++replica) {
    auto claimer = fleet->claimer();
    auto order = keys;
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(replica)));
    threads.emplace_back([&, claimer, order, replica] {
      for (const auto& key : order) {
        const ClaimResult claim = claimer->claim(key);
        if (claim.status != ClaimResult::Status::claimed) continue;
        std::lock_guard guard(mutex);
        EXPECT_TRUE(winners.emplace(key, replica).second) << key << " claimed twice";
        EXPECT_TRUE(fences.insert(claim.fence).second) << "fence " << claim.fence << " given twice";
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(winners.size(), static_cast<std::size_t>(fires));  // and none lost
}

TEST_P(CoordinationContract, TheDedupWindowIsPositiveAndWithinTheClaimTtl) {
  auto fleet = GetParam().make(false);
  const auto window = fleet->claimer()->dedup_window();
  EXPECT_GT(window, 0ns);
  EXPECT_LE(window, fleet->claim_ttl());
}

TEST_P(CoordinationContract, OneOfThreeElectorsLeadsWithATerm) {
  auto fleet = GetParam().make(false);
  std::vector<std::shared_ptr<Elector>> electors{fleet->elector(), fleet->elector(), fleet->elector()};
  ASSERT_TRUE(eventually([&] { return std::any_of(electors.begin(), electors.end(), [](auto& e) { return leads(*e); }); },
                         fleet->handover_bound()));
  int leaders = 0;
  for (auto& elector : electors) {
    const Leadership answer = elector->is_leader();
    if (answer.status != Leadership::Status::leader) continue;
    ++leaders;
    EXPECT_GT(answer.term, 0u);
  }
  EXPECT_EQ(leaders, 1);
  for (auto& elector : electors) elector->resign();
}

TEST_P(CoordinationContract, AResignationHandsOverWithAGreaterTerm) {
  auto fleet = GetParam().make(false);
  auto a = fleet->elector();
  ASSERT_TRUE(eventually([&] { return leads(*a); }, fleet->handover_bound()));
  const std::uint64_t first_term = a->is_leader().term;
  auto b = fleet->elector();
  EXPECT_NE(b->is_leader().status, Leadership::Status::leader);
  a->resign();
  ASSERT_TRUE(eventually([&] { return leads(*b); }, fleet->handover_bound()));
  EXPECT_GT(b->is_leader().term, first_term);
  EXPECT_NE(a->is_leader().status, Leadership::Status::leader);
  b->resign();
}

TEST_P(CoordinationContract, ALostLeaseIsReportedWithItsTerm) {
  auto fleet = GetParam().make(false);
  auto a = fleet->elector();
  std::mutex mutex;
  std::vector<std::uint64_t> lost;
  a->on_leadership_lost([&](std::uint64_t term) {
    std::lock_guard guard(mutex);
    lost.push_back(term);
  });
  ASSERT_TRUE(eventually([&] { return leads(*a); }, fleet->handover_bound()));
  const std::uint64_t term = a->is_leader().term;
  auto b = fleet->elector();
  fleet->end_lease();
  ASSERT_TRUE(eventually([&] { return leads(*b); }, fleet->handover_bound()));
  // The old leader learns it at its next look at the store, at the latest.
  ASSERT_TRUE(eventually([&] {
    (void)a->is_leader();
    std::lock_guard guard(mutex);
    return !lost.empty();
  }, fleet->handover_bound()));
  {
    std::lock_guard guard(mutex);
    EXPECT_EQ(lost.front(), term);
  }
  EXPECT_NE(a->is_leader().status, Leadership::Status::leader);
  a->on_leadership_lost({});
  b->resign();
}

TEST_P(StoreLossContract, ClaimsFailClosedWithoutThrowing) {
  auto fleet = GetParam().make(true);
  auto claimer = fleet->claimer();
  ASSERT_EQ(claimer->claim(future_fire_key("loss", 0)).status, ClaimResult::Status::claimed);
  fleet->lose_store();
  const ClaimResult alone = claimer->claim(future_fire_key("loss", 1));
  EXPECT_EQ(alone.status, ClaimResult::Status::error);
  EXPECT_FALSE(alone.error.empty());
  const std::vector<std::string> keys{future_fire_key("loss", 2), future_fire_key("loss", 3)};
  const auto batch = claimer->claim_batch(keys);
  ASSERT_EQ(batch.size(), 2u);
  for (const auto& result : batch) EXPECT_EQ(result.status, ClaimResult::Status::error);
}

TEST_P(StoreLossContract, AnElectorWithoutItsStoreDoesNotLead) {
  auto fleet = GetParam().make(true);
  auto elector = fleet->elector();
  ASSERT_TRUE(eventually([&] { return leads(*elector); }, fleet->handover_bound()));
  fleet->lose_store();
  // Within its lease at the latest, it says error or follower, never leader.
  EXPECT_TRUE(eventually([&] { return !leads(*elector); }, fleet->handover_bound() + 35'000ms));
}

}  // namespace fleetcron::test
