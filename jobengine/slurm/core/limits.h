#pragma once

// The largest Slurm job Muster runs, in one place (issue 43). Three parties hold a job to these
// numbers:
//   - sbatch refuses more, in Slurm's words (submit.h: "Requested node configuration is not
//     available", as slurmctld says of a request no node can hold);
//   - the ParallelJob CRD's `maximum:`s on spec.slurm are these numbers
//     (manifests/crds/paralleljobs.preferred.jp.yaml; tests/jobengine/slurm_runtime_test.cc reads
//     the CRD and compares);
//   - the job engine checks them again before it sizes anything by them (SlurmRuntime): a job
//     written past them (a CRD without the limits, kubectl edit, an older Muster) ends Failed with
//     reason InvalidSpec, an Event and a message naming the field, and nothing is allocated for it.
// Each limit sits well above any real machine, and far enough below the integer types that no
// product of two of them can overflow (tasks x cpus, nodes x tasks, ids + an array's tasks).

#include <cstdint>

namespace muster::jobengine::slurm {

// The latest time Muster reads or writes for a Slurm job, 9999-12-31T23:59:59Z as Unix seconds: the
// last an RFC 3339 date-time (the ParallelJob's status) holds. time.h's kLatestTimestamp and
// step_record.h's kMaxStepTime are this one number.
inline constexpr int64_t kLatestUnixSeconds = 253402300799;

// Job ids (also an array's job id): at most INT32_MAX, so that every tool prints them as Slurm
// does and the id counter (job_ids.h) can never overflow; 2^31 jobs is 68 years at one a second.
// (Slurm's own MAX_JOB_ID is 0x03FFFFFF, after which it starts again from FirstJobId; Muster never
// reuses an id, so it needs the larger range.)
inline constexpr int64_t kMaxJobId = 2147483647;
// Slurm's MAX_TASKS_PER_NODE (slurm.h): --ntasks-per-node and every spec.slurm.tasksPerNode entry.
inline constexpr int32_t kMaxTasksPerNode = 512;
// Every task of the largest job: 4096 nodes (jobengine/runtime.h kMaxNumPods) x 512 tasks.
inline constexpr int32_t kMaxTasks = 4096 * kMaxTasksPerNode;
// -c: the largest nodes have 2 x 192 cores with 2 threads each (768 CPUs).
inline constexpr int32_t kMaxCpusPerTask = 1024;
// GPUs per node and per task: the largest GPU servers have 8-16 GPUs; 8 GPUs split into 7 MIG
// instances each are 56 devices. The engine writes one index per GPU into the job's environment
// (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES), which INT32_MAX turned into gigabytes.
inline constexpr int32_t kMaxGpusPerNode = 64;
// --mem and --mem-per-cpu, in MiB: 64 TiB, above the largest single-system-image machines (32 TiB).
inline constexpr int64_t kMaxMemoryMb = int64_t{64} << 20;
// -t: time.h's bound (INT32_MAX seconds, about 68 years; Slurm's int overflows above it).
inline constexpr int64_t kMaxTimeLimitSeconds = 2147483647;
// --array task ids: Slurm's largest MaxArraySize is 4000001, so ids up to 4000000.
inline constexpr int64_t kMaxArrayTaskId = 4000000;
// The most job ids one sbatch takes from the id counter (job_ids.h): one per array task, and an
// array's task ids lie in [0, MaxArraySize - 1] with MaxArraySize 1001 (array.h
// kDefaultMaxArraySize, Slurm's default, which parseArraySpec enforces), so at most 1001 tasks.
// The chart's counter policy (templates/slurm-owners.yaml) admits an update of the counter that
// advances it by at most this many, so no user can burn the id space or jump it to the end.
inline constexpr int64_t kMaxArrayTasks = 1001;

}  // namespace muster::jobengine::slurm
