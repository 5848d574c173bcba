// Internal: the compare-and-swap loop over one of the fleet state's whole
// documents (the controls, the replica registry), shared so that each
// operation on them is an edit of the text and nothing more.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "fleetcron/fleet_state.h"

namespace fleetcron::detail {

/// What an edit writes back: the new text, and how long it lives (0: until replaced).
struct DocumentWrite {
  std::string text;
  std::chrono::nanoseconds keep_for{0};
};

/// Gets the document as read; answers what to write, or nullopt to write
/// nothing and stop (setting `error` if that is a failure).
using DocumentEditor =
    std::function<std::optional<DocumentWrite>(const FleetState::StoredDocument& read, std::string& error)>;

/// Reads the document, edits it and replaces it if it is still what was
/// read, again while another writer comes first (at most 16 rounds).
/// Answers the error, empty when done (written, or nothing to write).
[[nodiscard]] std::string edit_document(FleetState& state, FleetState::DocumentId which, const DocumentEditor& edit);

}  // namespace fleetcron::detail
