#pragma once

// The Debian-abseil string_view workaround (proto/strings.h), in the scheduler's namespace.

#include "proto/strings.h"

namespace muster::scheduler {

using proto::av;
using proto::strCat;

}  // namespace muster::scheduler
