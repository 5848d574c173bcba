// For backend authors: the fleet-wide documents a FleetState keeps whole
// (the controls, the replica registry, the job catalogue). A backend
// implements two primitives — read a document, replace it if unchanged —
// and FleetState's controls, registry and catalogue operations apply
// their rules through them, the same on every backend.
#pragma once

#include <chrono>
#include <cstddef>
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
  /// The catalogue is kept in catalogue_parts documents, each job's line
  /// in the part of its key (catalogue_part()), so that no one value
  /// outgrows what a store takes (NATS: 1 MiB) at 100,000 jobs.
  static constexpr std::uint32_t catalogue_parts = 32;
  /// One document: the controls, the registry, or one part of the
  /// catalogue (`part` 0 to catalogue_parts - 1; 0 for the others).
  struct FLEETCRON_API DocumentId {
    // Implicit: a Document names its first (for the controls and the registry, only) part.
    DocumentId(Document kind, std::uint32_t part_index = 0) noexcept  // NOLINT(google-explicit-constructor)
        : which(kind), part(part_index) {}
    Document which;
    std::uint32_t part;
    friend bool operator==(const DocumentId&, const DocumentId&) = default;
  };
  /// How many documents there are, and each one's place among them:
  /// for a backend that keeps them in an array.
  static constexpr std::size_t document_slots = 2 + catalogue_parts;
  [[nodiscard]] static std::size_t slot(DocumentId id) noexcept {
    return id.which == Document::catalogue ? 2 + id.part : static_cast<std::size_t>(id.which);
  }
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
  [[nodiscard]] virtual StoredDocument load_document(DocumentId which) = 0;
  [[nodiscard]] virtual DocumentReplace replace_document(DocumentId which, const StoredDocument& seen,
                                                         const std::string& text, std::chrono::nanoseconds keep_for) = 0;

 protected:
  FleetDocuments() = default;
  FleetDocuments(const FleetDocuments&) = default;
  FleetDocuments& operator=(const FleetDocuments&) = default;
};

/// The name of a kind of document: "controls", "replicas" or "jobs".
[[nodiscard]] FLEETCRON_API std::string_view to_string(FleetDocuments::Document which) noexcept;
/// The name of a document in the stores: "controls", "replicas", "jobs"
/// (the catalogue's part 0: the one key releases before 0.3 read) and
/// "jobs.1" to "jobs.31".
[[nodiscard]] FLEETCRON_API std::string document_name(FleetDocuments::DocumentId id);

}  // namespace fleetcron
