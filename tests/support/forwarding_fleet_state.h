// A fleet state that forwards every call to another; tests derive from it
// and override what they change (a store that fails, blocks or counts).
#pragma once

#include <memory>

#include "fleetcron/fleet_state.h"

namespace fleetcron::test {

class ForwardingFleetState : public FleetState {
 public:
  explicit ForwardingFleetState(std::shared_ptr<FleetState> inner) : inner_(std::move(inner)) {}
  CursorRead read_cursor(std::string_view job) override { return inner_->read_cursor(job); }
  CursorAdvance advance_cursor(std::string_view job, Instant at, std::uint64_t digest,
                               std::chrono::nanoseconds keep) override {
    return inner_->advance_cursor(job, at, digest, keep);
  }
  CatchUpClaim claim_catch_up(std::string_view job, const std::optional<JobCursor>& seen, Instant at,
                              std::uint64_t digest, std::chrono::nanoseconds keep,
                              std::string_view claimant) override {
    return inner_->claim_catch_up(job, seen, at, digest, keep, claimant);
  }
  std::vector<LedgerWriteResult> record_fires(std::span<const LedgerWrite> writes) override {
    return inner_->record_fires(writes);
  }
  LedgerRead read_fires(std::string_view job, std::size_t limit) override { return inner_->read_fires(job, limit); }
  std::optional<Instant> store_now() override { return inner_->store_now(); }
  StoredDocument load_document(DocumentId which) override { return inner_->load_document(which); }
  DocumentReplace replace_document(DocumentId which, const StoredDocument& seen, const std::string& text,
                                   std::chrono::nanoseconds keep_for) override {
    return inner_->replace_document(which, seen, text, keep_for);
  }

 protected:
  std::shared_ptr<FleetState> inner_;
};

}  // namespace fleetcron::test
