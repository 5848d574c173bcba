// The error root's one out-of-line member: its key function, so its type
// information is emitted (and exported) once, by the core library.
#include "fleetcron/error.h"

namespace fleetcron {

Error::~Error() = default;

}  // namespace fleetcron
