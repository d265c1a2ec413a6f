#include "jobengine/slurm/cli/job_ids.h"

#include <chrono>
#include <random>
#include <thread>

#include "jobengine/slurm/core/limits.h"
#include "proto/codec.h"
#include "proto/json.h"
#include "proto/strings.h"

namespace muster::jobengine::slurm {

using proto::strCat;

namespace {

constexpr char kKey[] = "next";

proto::Request counterRequest(proto::Verb verb, const ObjectName& counter, std::string body) {
  proto::Request r;
  r.verb = verb;
  r.path = verb == proto::Verb::kPost
               ? proto::resources::kConfigMaps.collectionPath(counter.namespace_)
               : proto::resources::kConfigMaps.objectPath(counter.namespace_, counter.name);
  r.body = std::move(body);
  return r;
}

std::string counterBody(const ObjectName& counter, int64_t next, const std::string& rv) {
  proto::ConfigMap cm;
  cm.meta.name = counter.name;
  cm.meta.namespace_ = counter.namespace_;
  cm.meta.resource_version = rv;
  cm.data[kKey] = strCat(next);
  return proto::encode(cm);
}

}  // namespace

absl::StatusOr<int64_t> takeJobIds(int64_t next, int64_t count) {
  if (count < 1) return absl::InvalidArgumentError("takeJobIds: count must be positive");
  // Checked before adding: anyone who may update the counter may write any number into it.
  const int64_t left = next >= 1 && next <= kMaxJobId ? kMaxJobId - next + 1 : 0;
  if (count > left)
    return absl::FailedPreconditionError(
        strCat("only ", left, left == 1 ? " job id is" : " job ids are", " left below Muster's limit of ",
               kMaxJobId, " (", count, " asked for); the job id counter is at ", next));
  return next + count;
}

absl::StatusOr<int64_t> allocateJobId(proto::Client& client, const ObjectName& counter,
                                      int max_attempts) {
  return allocateJobIds(client, counter, 1, max_attempts);
}

absl::StatusOr<int64_t> allocateJobIds(proto::Client& client, const ObjectName& counter,
                                       int64_t count, int max_attempts) {
  if (count < 1) return absl::InvalidArgumentError("allocateJobIds: count must be positive");
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    if (attempt > 0) {
      // Concurrent submitters collide; spread them out a little.
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int>(1, 10 + 5 * std::min(attempt, 10))(rng)));
    }
    auto got = client.callSync(counterRequest(proto::Verb::kGet, counter, ""));
    if (!got.ok() && proto::isNotFound(got.status())) {
      // The first job of the cluster: ids from 1, the counter after them.
      absl::StatusOr<int64_t> after_first = takeJobIds(1, count);
      if (!after_first.ok()) return after_first.status();
      auto created = client.callSync(
          counterRequest(proto::Verb::kPost, counter, counterBody(counter, *after_first, "")));
      if (created.ok()) return 1;
      if (proto::isAlreadyExists(created.status())) continue;
      return absl::Status(created.status().code(),
                          strCat("cannot create the job id counter ConfigMap ", counter.namespace_,
                                 "/", counter.name, ": ", created.status().message()));
    }
    if (!got.ok())
      return absl::Status(got.status().code(),
                          strCat("cannot read the job id counter ConfigMap ", counter.namespace_, "/",
                                 counter.name, ": ", got.status().message()));
    auto doc = proto::parseJson(*got);
    if (!doc.ok() || !doc->IsObject()) return absl::InternalError("the job id counter is not JSON");
    std::string rv;
    int64_t next = 0;
    if (auto m = doc->FindMember("metadata"); m != doc->MemberEnd() && m->value.IsObject())
      if (auto r = m->value.FindMember("resourceVersion");
          r != m->value.MemberEnd() && r->value.IsString())
        rv = r->value.GetString();
    if (auto d = doc->FindMember("data"); d != doc->MemberEnd() && d->value.IsObject())
      if (auto n = d->value.FindMember(kKey); n != d->value.MemberEnd() && n->value.IsString())
        if (!proto::parseInt64(n->value.GetString(), &next)) next = 0;
    if (next < 1 || rv.empty())
      return absl::FailedPreconditionError(
          strCat("the job id counter ConfigMap ", counter.namespace_, "/", counter.name,
                 " has no valid data.next; fix or delete it"));
    absl::StatusOr<int64_t> after = takeJobIds(next, count);
    if (!after.ok()) return after.status();
    auto written = client.callSync(
        counterRequest(proto::Verb::kPut, counter, counterBody(counter, *after, rv)));
    if (written.ok()) return next;
    if (proto::isConflict(written.status())) continue;  // someone else took `next`
    return absl::Status(written.status().code(),
                        strCat("cannot update the job id counter ConfigMap ", counter.namespace_,
                               "/", counter.name, ": ", written.status().message()));
  }
  return absl::UnavailableError(
      strCat("could not take a job id after ", max_attempts, " tries (too many concurrent sbatch)"));
}

}  // namespace muster::jobengine::slurm
