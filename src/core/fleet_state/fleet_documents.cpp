// The compare-and-swap loop over a fleet state document (fleet_documents.h).
#include "core/fleet_state/fleet_documents.h"

#include <fmt/format.h>

namespace fleetcron {

namespace {

// Rounds before an edit gives up: each lost round means another replica
// or operator changed the document in between.
constexpr int max_document_rounds = 16;

}  // namespace

std::string_view to_string(FleetState::Document which) noexcept {
  switch (which) {
    case FleetState::Document::controls: return "controls";
    case FleetState::Document::registry: return "replicas";
    case FleetState::Document::catalogue: return "jobs";
  }
  return "unknown";
}

std::string document_name(FleetState::DocumentId id) {
  if (id.which == FleetState::Document::catalogue && id.part > 0) return fmt::format("jobs.{}", id.part);
  return std::string(to_string(id.which));
}

std::string detail::edit_document(FleetState& state, FleetState::DocumentId which, const DocumentEditor& edit) {
  using Stored = FleetState::StoredDocument;
  using Replace = FleetState::DocumentReplace;
  for (int round = 0; round < max_document_rounds; ++round) {
    const Stored read = state.load_document(which);
    if (read.status == Stored::Status::error) return read.error;
    std::string error;
    const std::optional<DocumentWrite> write = edit(read, error);
    if (!write) return error;
    const Replace replaced = state.replace_document(which, read, write->text, write->keep_for);
    if (replaced.status == Replace::Status::written) return {};
    if (replaced.status == Replace::Status::error) return replaced.error;
  }
  return fmt::format("the fleet's {} kept changing under {} compare-and-swaps", document_name(which), max_document_rounds);
}

}  // namespace fleetcron
