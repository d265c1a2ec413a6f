#pragma once

// Builders for job engine tests: the seed's ParallelJob as the API server returns it (defaults
// applied), and pods as the runtime generates them, with the status kwok/kubelet would report.

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "jobengine/mpi_openmpi.h"
#include "jobengine/naming.h"
#include "jobengine/runtime.h"
#include "proto/codec.h"

namespace muster::jobengine::testing {

// The seed guide's mpi-sample-job (shared/seeds/000_*.txt), as JSON after defaulting.
inline std::string seedJobJson(const std::string& name = "mpi-sample-job", int num_pods = 3,
                               int procs = 2, int max_restarts = 3,
                               const std::string& runtime = "mpi-openmpi",
                               const std::string& extra_spec = "",
                               const std::string& annotations = "{}") {
  return absl::StrCat(
      R"({"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob","metadata":{"name":")", name,
      R"(","namespace":"default","uid":"6c1f5a3e-1111-4a8e-9c9e-0123456789ab","resourceVersion":"100",)",
      R"("annotations":)", annotations, R"(},"spec":{"runtimeRef":{"name":")", runtime,
      R"("},"numPods":)", num_pods, R"(,"numProcPerPod":)", procs,
      R"(,"failurePolicy":{"maxRestarts":)", max_restarts, R"(},)",
      R"("launcher":{"spec":{"containers":[{"name":"main","image":"ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0",)",
      R"("command":["sh","-c","mpicc -o hello_mpi hello_mpi.c\nmpirun --allow-run-as-root ./hello_mpi\n"]}]}})",
      extra_spec, "}}");
}

inline proto::ParallelJob decodeJob(const std::string& json) {
  proto::ParallelJob job;
  absl::Status s = proto::decodeJson(json, &job);
  INFO(s.ToString());
  REQUIRE(s.ok());
  return job;
}

inline proto::ParallelJob seedJob() { return decodeJob(seedJobJson()); }

// A pod of `job`'s attempt as the runtime makes it, then given a status.
class PodBuilder {
 public:
  PodBuilder(const proto::ParallelJob& job, int32_t attempt, int32_t index) {
    OpenMpiRuntime runtime(RuntimeOptions{});
    AttemptInfo info{attempt, groupName(job.meta.name, attempt)};
    auto body = runtime.buildPod(job, info, index);
    REQUIRE(body.ok());
    REQUIRE(proto::decodeJson(*body, &pod_).ok());
    pod_.meta.uid = "pod-uid-" + std::to_string(attempt) + "-" + std::to_string(index);
    pod_.meta.resource_version = "1";
    pod_.status.phase = "Pending";
  }
  PodBuilder& running() {
    pod_.status.phase = "Running";
    pod_.spec.node_name = "node-00001";
    pod_.status.conditions = {{"PodScheduled", "True", "", "", ""}, {"Ready", "True", "", "", ""}};
    return *this;
  }
  PodBuilder& node(const std::string& n) {
    pod_.spec.node_name = n;
    return *this;
  }
  PodBuilder& succeeded() {
    pod_.status.phase = "Succeeded";
    pod_.status.container_statuses = {{"main", false, 0, "terminated", 0, "Completed", {}, ""}};
    return *this;
  }
  PodBuilder& failed(int32_t exit_code, const std::string& reason) {
    pod_.status.phase = "Failed";
    pod_.status.container_statuses = {{"main", false, 0, "terminated", exit_code, reason, {}, ""}};
    return *this;
  }
  PodBuilder& deleting() {
    pod_.meta.deletion_timestamp = "2026-01-01T00:00:00Z";
    return *this;
  }
  PodBuilder& unschedulable(const std::string& message) {
    pod_.status.conditions = {{"PodScheduled", "False", "Unschedulable", message, ""}};
    return *this;
  }
  PodBuilder& annotate(const std::string& k, const std::string& v) {
    pod_.meta.annotations[k] = v;
    return *this;
  }
  PodBuilder& condition(const std::string& type, const std::string& status,
                        const std::string& reason = "") {
    pod_.status.conditions.push_back({type, status, reason, "", ""});
    return *this;
  }
  // What muster-scheduler sets on every member of a gang it preempts, before evicting it.
  PodBuilder& preempted(const std::string& by = "ml/big-train") {
    pod_.status.conditions.push_back({proto::vocabulary::kPreemptedCondition, "True",
                                      proto::vocabulary::kPreemptedReason, "Preempted by " + by, ""});
    return *this;
  }
  std::shared_ptr<const proto::Pod> build() const { return std::make_shared<proto::Pod>(pod_); }
  operator std::shared_ptr<const proto::Pod>() const { return build(); }

 private:
  proto::Pod pod_;
};

inline PodBuilder pod(const proto::ParallelJob& job, int32_t attempt, int32_t index) {
  return PodBuilder(job, attempt, index);
}

}  // namespace muster::jobengine::testing
