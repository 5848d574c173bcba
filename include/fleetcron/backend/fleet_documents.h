// For backend authors: the fleet-wide documents a FleetState keeps whole
// (the controls, the replica registry, the job catalogue). A backend
// implements two primitives — read a document, replace it if unchanged —
// and FleetState's controls, registry and catalogue operations apply
// their rules through them, the same on every backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "fleetcron/api.h"

namespace fleetcron {

/// The documents and their two primitives; FleetState derives from it.
class FLEETCRON_API FleetDocuments {
 public:
  virtual ~FleetDocuments() = default;

  /// The fleet-wide documents: each is read whole and replaced by a
  /// compare-and-swap, so the rules are written once, for every backend.
  enum class Document {
    controls,   ///< format_job_controls(); kept until replaced
    registry,   ///< format_replica_registry(); lives `keep_for` after its last write
    catalogue,  ///< format_job_catalogue(); lives `keep_for` after its last write
  };
  /// A document as the backend keeps it.
  struct FLEETCRON_API StoredDocument {
    enum class Status { found, absent, error };
    Status status = Status::absent;
    std::string text = {};
    std::uint64_t revision = 0;  ///< the backend's version of it, where it has one (NATS)
    std::string error = {};
  };
  struct FLEETCRON_API DocumentReplace {
    enum class Status { written, conflict, error };
    Status status = Status::error;
    std::string error = {};
  };
  /// The document, and its replacement by `text` only if it is still
  /// `seen` (absent: still absent); `conflict` if another writer came
  /// first. The document then lives at least `keep_for` (0: until it is
  /// replaced; a backend whose expiry is per store, as NATS's per bucket,
  /// keeps it that long). Thread-safe, bounded in time, failures answered
  /// as `error`, never thrown.
  [[nodiscard]] virtual StoredDocument load_document(Document which) = 0;
  [[nodiscard]] virtual DocumentReplace replace_document(Document which, const StoredDocument& seen,
                                                         const std::string& text, std::chrono::nanoseconds keep_for) = 0;

 protected:
  FleetDocuments() = default;
  FleetDocuments(const FleetDocuments&) = default;
  FleetDocuments& operator=(const FleetDocuments&) = default;
};

/// The name of a document in the stores: "controls", "replicas" or "jobs".
[[nodiscard]] FLEETCRON_API std::string_view to_string(FleetDocuments::Document which) noexcept;

}  // namespace fleetcron
