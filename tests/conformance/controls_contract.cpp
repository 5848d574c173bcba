// The fleet-wide controls' part of the fleet-state contract
// (docs/fleet-state.md#controls), instantiated for every backend with the
// rest of FleetStateContract.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "conformance/fleet_state_contract.h"
#include "support/time.h"

namespace fleetcron::test {

using namespace std::chrono_literals;

namespace {

std::string job(const char* name) { return contract_job("controls-", name); }

/// The job's controls as `state` reads them at `now`; nullopt if none.
std::optional<JobControl> control_of(FleetState& state, const std::string& job_key, Instant now) {
  const ControlsRead read = state.read_controls(now);
  EXPECT_EQ(read.status, ControlsRead::Status::found) << read.error;
  for (const auto& control : read.jobs) {
    if (control.job_key == job_key) return control;
  }
  return std::nullopt;
}

ControlChange::Status status_of(const ControlChange& change) {
  EXPECT_NE(change.status, ControlChange::Status::error) << change.error;
  return change.status;
}

}  // namespace

TEST_P(FleetStateContract, APauseIsSeenByEveryReplicaUntilResumed) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("pause");
  const Instant now = real_now();
  EXPECT_EQ(status_of(a->set_paused(key, false, "operator", now)), ControlChange::Status::unchanged);
  EXPECT_FALSE(control_of(*b, key, now));
  EXPECT_EQ(status_of(a->set_paused(key, true, "operator", now)), ControlChange::Status::changed);
  EXPECT_EQ(status_of(b->set_paused(key, true, "someone-else", now)), ControlChange::Status::unchanged);
  const auto paused = control_of(*b, key, now);
  ASSERT_TRUE(paused);
  EXPECT_TRUE(paused->paused);
  EXPECT_EQ(paused->changed_by, "operator");  // the second pause changed nothing
  EXPECT_EQ(paused->changed_at, cursor_instant(now));
  EXPECT_TRUE(paused->triggers.empty());
  const Instant later = now + 1s;
  EXPECT_EQ(status_of(b->set_paused(key, false, "resumer", later)), ControlChange::Status::changed);
  EXPECT_FALSE(control_of(*a, key, later)) << "a resumed job without triggers is not listed as controlled";
  // Its resume stays on record for resume_record_keep: a replica that
  // applied the pause tells a store that lost it from a resume.
  const auto resumed_at = [&](Instant at) -> std::optional<JobControl> {
    const ControlsRead read = a->read_controls(at);
    for (const auto& control : read.resumed) {
      if (control.job_key == key) return control;
    }
    return std::nullopt;
  };
  const auto resumed = resumed_at(later);
  ASSERT_TRUE(resumed);
  EXPECT_FALSE(resumed->paused);
  EXPECT_EQ(resumed->changed_by, "resumer");
  EXPECT_EQ(resumed->changed_at, cursor_instant(later));
  EXPECT_EQ(status_of(a->set_paused(key, false, "operator", later)), ControlChange::Status::unchanged);
  EXPECT_TRUE(resumed_at(later + resume_record_keep - 1s)) << "kept for resume_record_keep";
  EXPECT_FALSE(resumed_at(later + resume_record_keep)) << "then gone from every read";
  // A writer whose clock is behind still stamps its change after the one
  // it replaces: replicas tell a store that went back by an older stamp.
  EXPECT_EQ(status_of(a->set_paused(key, true, "behind", now - 10s)), ControlChange::Status::changed);
  const auto paused_again = control_of(*b, key, later);
  ASSERT_TRUE(paused_again);
  EXPECT_EQ(paused_again->changed_at, cursor_instant(later) + 1us);
}

TEST_P(FleetStateContract, ATriggerIsTakenByExactlyOneOfManyReplicas) {
  auto fleet = GetParam().make();
  auto requester = fleet->replica();
  const std::string key = job("trigger");
  const Instant now = real_now();
  const ControlChange requested = requester->request_trigger(key, "operator", now);
  ASSERT_EQ(requested.status, ControlChange::Status::changed) << requested.error;
  ASSERT_EQ(requested.trigger_id.size(), 16u);
  const auto waiting = control_of(*requester, key, now);
  ASSERT_TRUE(waiting);
  ASSERT_EQ(waiting->triggers.size(), 1u);
  EXPECT_EQ(waiting->triggers.front().id, requested.trigger_id);
  EXPECT_EQ(waiting->triggers.front().requested_by, "operator");
  EXPECT_EQ(waiting->triggers.front().requested_at, cursor_instant(now));
  EXPECT_EQ(waiting->triggers.front().expires_at, cursor_instant(now + default_trigger_wait));
  EXPECT_FALSE(waiting->paused);

  constexpr int replicas = 4;
  std::vector<std::shared_ptr<FleetState>> states;
  for (int i = 0; i < replicas; ++i) states.push_back(fleet->replica());
  std::atomic<int> taken{0}, absent{0};
  std::barrier start(replicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < replicas; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      const ControlChange change = states[static_cast<std::size_t>(i)]->take_trigger(key, requested.trigger_id, now);
      if (change.status == ControlChange::Status::changed) ++taken;
      if (change.status == ControlChange::Status::absent) ++absent;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(taken.load(), 1);
  EXPECT_EQ(absent.load(), replicas - 1);
  EXPECT_FALSE(control_of(*requester, key, now));
}

// A request id makes a trigger request idempotent: sent again while its
// trigger waits, it adds nothing and names the same trigger.
TEST_P(FleetStateContract, ARequestSentAgainWithItsIdAddsNoTrigger) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("request-id");
  const Instant now = real_now();
  const ControlChange first = a->request_trigger(key, "operator", now, default_trigger_wait, "req-1");
  ASSERT_EQ(first.status, ControlChange::Status::changed) << first.error;
  EXPECT_EQ(first.trigger_id, trigger_id_of(key, "req-1"));
  const ControlChange again = b->request_trigger(key, "operator", now + 1s, default_trigger_wait, "req-1");
  EXPECT_EQ(again.status, ControlChange::Status::unchanged) << again.error;
  EXPECT_EQ(again.trigger_id, first.trigger_id);
  const ControlChange other = b->request_trigger(key, "operator", now, default_trigger_wait, "req-2");
  EXPECT_EQ(other.status, ControlChange::Status::changed) << other.error;
  EXPECT_NE(other.trigger_id, first.trigger_id);
  const auto waiting = control_of(*a, key, now + 1s);
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->triggers.size(), 2u);
  EXPECT_NE(trigger_id_of("another-job", "req-1"), first.trigger_id);
  EXPECT_THROW((void)a->request_trigger(key, "operator", now, default_trigger_wait, "two words"), std::invalid_argument);
  EXPECT_THROW((void)a->request_trigger(key, "operator", now, default_trigger_wait, std::string(129, 'x')),
               std::invalid_argument);
}

// A taken trigger stays a while as a tombstone naming its taker: a
// request sent again with its id is known as taken, and a taker whose
// answer was lost can find it took it.
TEST_P(FleetStateContract, ATakenTriggerStaysAsATombstoneNamingItsTaker) {
  auto fleet = GetParam().make();
  auto a = fleet->replica(), b = fleet->replica();
  const std::string key = job("tombstone");
  const Instant now = real_now();
  const ControlChange asked = a->request_trigger(key, "operator", now, default_trigger_wait, "req-t");
  ASSERT_EQ(asked.status, ControlChange::Status::changed) << asked.error;
  ASSERT_EQ(status_of(b->take_trigger(key, asked.trigger_id, now, "replica-b")), ControlChange::Status::changed);
  EXPECT_EQ(status_of(a->take_trigger(key, asked.trigger_id, now, "replica-a")), ControlChange::Status::absent);
  const ControlsRead read = a->read_controls(now + 1s);
  ASSERT_EQ(read.status, ControlsRead::Status::found) << read.error;
  EXPECT_FALSE(control_of(*a, key, now + 1s)) << "not waiting";
  ASSERT_EQ(read.taken.size(), 1u);
  EXPECT_EQ(read.taken.front().job_key, key);
  EXPECT_EQ(read.taken.front().trigger.id, asked.trigger_id);
  EXPECT_EQ(read.taken.front().trigger.requested_by, "replica-b");
  EXPECT_TRUE(is_taken_trigger(read.taken.front().trigger));
  const ControlChange again = a->request_trigger(key, "operator", now + 2s, default_trigger_wait, "req-t");
  EXPECT_EQ(again.status, ControlChange::Status::unchanged) << "sent again after it was taken";
  EXPECT_EQ(again.trigger_id, asked.trigger_id);
  // Tombstones make room: the bound counts waiting triggers.
  for (std::size_t i = 0; i < max_job_triggers; ++i) {
    ASSERT_EQ(status_of(a->request_trigger(key, "operator", now + 3s)), ControlChange::Status::changed) << i;
  }
  EXPECT_TRUE(a->read_controls(now + 3s).taken.empty()) << "the oldest tombstone made room";
  // Kept trigger_tombstone_keep after the request.
  const std::string other = job("tombstone-2");
  const ControlChange later = a->request_trigger(other, "operator", now, default_trigger_wait, "r");
  ASSERT_EQ(status_of(a->take_trigger(other, later.trigger_id, now, "replica-a")), ControlChange::Status::changed);
  EXPECT_EQ(a->read_controls(now + trigger_tombstone_keep - 1s).taken.size(), 1u);
  EXPECT_TRUE(a->read_controls(now + trigger_tombstone_keep).taken.empty());
}

TEST_P(FleetStateContract, TriggersExpireAndEachJobHoldsABoundedNumber) {
  auto fleet = GetParam().make();
  auto state = fleet->replica();
  const std::string key = job("expiry");
  const Instant now = real_now();
  const ControlChange shortlived = state->request_trigger(key, "operator", now, 1s);
  ASSERT_EQ(shortlived.status, ControlChange::Status::changed) << shortlived.error;
  EXPECT_TRUE(control_of(*state, key, now + 999ms));
  EXPECT_FALSE(control_of(*state, key, now + 1s)) << "expired at its deadline";
  EXPECT_EQ(status_of(state->take_trigger(key, shortlived.trigger_id, now + 1s)), ControlChange::Status::absent);

  // Expired, it counts against the bound until a replica reports it
  // (drop_expired_triggers()): a request that dropped it would lose its report.
  const Instant later = now + 1s;
  for (std::size_t i = 0; i + 1 < max_job_triggers; ++i) {
    ASSERT_EQ(status_of(state->request_trigger(key, "operator", later)), ControlChange::Status::changed) << i;
  }
  const ControlChange full = state->request_trigger(key, "operator", later);
  EXPECT_EQ(full.status, ControlChange::Status::error) << "the expired one still holds its place";
  const ControlsRead reported = state->drop_expired_triggers(later);
  ASSERT_EQ(reported.expired.size(), 1u) << reported.error;
  ASSERT_EQ(status_of(state->request_trigger(key, "operator", later)), ControlChange::Status::changed);
  const ControlChange over = state->request_trigger(key, "operator", later);
  EXPECT_EQ(over.status, ControlChange::Status::error);
  EXPECT_NE(over.error.find("16 triggers waiting"), std::string::npos) << over.error;
  const auto held = control_of(*state, key, later);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->triggers.size(), max_job_triggers);
}

// An expired trigger is read as expired, and answered to exactly one of
// the replicas that drop it at once: that one reports it.
TEST_P(FleetStateContract, AnExpiredTriggerIsHandedToExactlyOneReplicaThatDropsIt) {
  auto fleet = GetParam().make();
  constexpr std::size_t replicas = 4;
  std::vector<std::shared_ptr<FleetState>> states;
  for (std::size_t i = 0; i < replicas; ++i) states.push_back(fleet->replica());
  const std::string key = job("expired");
  const Instant now = real_now();
  const ControlChange asked = states[0]->request_trigger(key, "operator", now, 1s);
  ASSERT_EQ(asked.status, ControlChange::Status::changed) << asked.error;
  EXPECT_TRUE(states[1]->read_controls(now).expired.empty());
  const ControlsRead seen = states[1]->read_controls(now + 2s);
  ASSERT_EQ(seen.expired.size(), 1u);
  EXPECT_EQ(seen.expired.front().job_key, key);
  EXPECT_EQ(seen.expired.front().trigger.id, asked.trigger_id);
  std::vector<ControlsRead> answers(replicas);
  std::barrier start(static_cast<std::ptrdiff_t>(replicas));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < replicas; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = states[i]->drop_expired_triggers(now + 2s);
    });
  }
  for (auto& thread : threads) thread.join();
  std::size_t reported = 0;
  for (const auto& answer : answers) {
    ASSERT_EQ(answer.status, ControlsRead::Status::found) << answer.error;
    reported += answer.expired.size();
  }
  EXPECT_EQ(reported, 1u);
  EXPECT_TRUE(states[2]->read_controls(now).expired.empty() && !control_of(*states[2], key, now))
      << "gone from the document";
}

// Found by the simulator: any other change (a take, a request, a pause)
// used to drop the expired triggers it found without a word, so a trigger
// that expired just before another replica took some other job's trigger
// was never reported. Other changes keep them for drop_expired_triggers(),
// and an expired trigger cannot be taken.
TEST_P(FleetStateContract, OtherChangesKeepAnExpiredTriggerForItsReport) {
  auto fleet = GetParam().make();
  auto a = fleet->replica();
  auto b = fleet->replica();
  const std::string expiring = job("expiring"), other = job("other");
  const Instant now = real_now();
  const ControlChange asked = a->request_trigger(expiring, "operator", now, 1s);
  ASSERT_EQ(asked.status, ControlChange::Status::changed) << asked.error;
  const ControlChange second = a->request_trigger(other, "operator", now, 1min);
  ASSERT_EQ(second.status, ControlChange::Status::changed) << second.error;
  const Instant later = now + 2s;
  EXPECT_EQ(b->take_trigger(expiring, asked.trigger_id, later, "b").status, ControlChange::Status::absent)
      << "expired: not taken";
  EXPECT_EQ(b->take_trigger(other, second.trigger_id, later, "b").status, ControlChange::Status::changed);
  EXPECT_EQ(b->set_paused(other, true, "operator", later).status, ControlChange::Status::changed);
  const ControlsRead dropped = a->drop_expired_triggers(later);
  ASSERT_EQ(dropped.status, ControlsRead::Status::found) << dropped.error;
  ASSERT_EQ(dropped.expired.size(), 1u) << "kept by the take and the pause, for this report";
  EXPECT_EQ(dropped.expired.front().trigger.id, asked.trigger_id);
  EXPECT_TRUE(b->read_controls(later).expired.empty()) << "dropped by the report";
}

TEST_P(FleetStateContract, ConcurrentChangesToDifferentJobsAreAllKept) {
  auto fleet = GetParam().make();
  constexpr int writers = 4, jobs_each = 4;
  const Instant now = real_now();
  const std::string base = job("concurrent");
  std::vector<std::shared_ptr<FleetState>> states;
  for (int i = 0; i < writers; ++i) states.push_back(fleet->replica());
  std::atomic<int> failures{0};
  std::barrier start(writers);
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      for (int j = 0; j < jobs_each; ++j) {
        const std::string key = base + "-" + std::to_string(w) + "-" + std::to_string(j);
        const ControlChange change = states[static_cast<std::size_t>(w)]->set_paused(key, true, "writer", now);
        if (change.status != ControlChange::Status::changed) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  const ControlsRead read = states.front()->read_controls(now);
  ASSERT_EQ(read.status, ControlsRead::Status::found) << read.error;
  const auto mine = std::count_if(read.jobs.begin(), read.jobs.end(), [&](const JobControl& control) {
    return control.job_key.starts_with(base + "-") && control.paused;
  });
  EXPECT_EQ(mine, writers * jobs_each);
}

TEST_P(FleetStateContract, ControlArgumentsAreCheckedBeforeAnyWrite) {
  auto fleet = GetParam().make();
  auto state = fleet->replica();
  const Instant now = real_now();
  EXPECT_THROW((void)state->set_paused("  ", true, "operator", now), std::invalid_argument);
  EXPECT_THROW((void)state->set_paused(job("args"), true, "two words", now), std::invalid_argument);
  EXPECT_THROW((void)state->set_paused(job("args"), true, "", now), std::invalid_argument);
  EXPECT_THROW((void)state->request_trigger(job("args"), "operator", now, 0s), std::invalid_argument);
  EXPECT_THROW((void)state->request_trigger(job("args"), "operator", now, max_trigger_wait + 1ns), std::invalid_argument);
  const ControlsRead read = state->read_controls(now);
  ASSERT_EQ(read.status, ControlsRead::Status::found) << read.error;
  EXPECT_TRUE(read.jobs.empty());
}

}  // namespace fleetcron::test
