#pragma once

// Slurm job ids: integers, unique in the cluster, increasing, never reused — also across
// scheduler restarts and concurrent sbatch calls. One ConfigMap holds the next id
// (data.next); an id is taken by a compare-and-swap: read it, write next+1 with the
// resourceVersion read (the API server refuses a stale write with 409), retry on conflict.
// The first sbatch of a cluster creates the ConfigMap (the chart creates it at install, so
// users need only get and update on it).

#include <cstdint>

#include "absl/status/statusor.h"
#include "jobengine/slurm/runtime/cluster_config.h"
#include "proto/client.h"

namespace muster::jobengine::slurm {

// The counter's next value once `count` ids are taken from `next` (the first of them).
// FailedPrecondition when they would pass kMaxJobId (limits.h), or `next` is not a job id: ids
// are never reused, so the counter stops there instead of wrapping around.
absl::StatusOr<int64_t> takeJobIds(int64_t next, int64_t count);

// Blocking (Client::callSync): for the CLI, not for the executor's own thread.
absl::StatusOr<int64_t> allocateJobId(proto::Client& client, const ObjectName& counter,
                                      int max_attempts = 50);
// `count` consecutive ids (a job array's tasks), taken in one compare-and-swap; the first.
absl::StatusOr<int64_t> allocateJobIds(proto::Client& client, const ObjectName& counter,
                                       int64_t count, int max_attempts = 50);

}  // namespace muster::jobengine::slurm
