#pragma once

// The tenancy hooks of a preemption decision (scheduler/preemption.h): which units may be victims
// of a reclaim, and which sets of victims a queue's quota and fair share let go. One function, so
// that Scheduler::preempt and bench/tenancy_bench.cc run the same code.

#include <string>

#include "scheduler/preemption.h"
#include "scheduler/tenancy/tenancy.h"

namespace muster::scheduler::tenancy {

// Sets the hooks for a gang of `queue` asking for `asked`:
// - with `reclaim` (the queue is below its fair share): `eligible` takes units whose queue
//   mayReclaimFrom(queue, …) allows, and `allowed` checks victimsAllowed(…, reclaim = true);
// - without (priority preemption): `allowed` only, victimsAllowed(…, reclaim = false), which
//   takes no other queue's work within its quota; `eligible` is left as it was.
// The hooks hold a reference to `tenancy`: use the request while it lives and is not changed
// (choosePreemption does, synchronously).
void withReclaimHooks(PreemptionRequest& preemption, const Tenancy& tenancy, std::string queue,
                      Request asked, bool reclaim);

}  // namespace muster::scheduler::tenancy
