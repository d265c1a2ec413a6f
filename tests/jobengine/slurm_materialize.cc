// Writes what sbatch and the slurm runtime generate for a batch script (job 101 in namespace
// "default") to a directory, for slurm_ssh_test.sh to run with real sshd, srun and mpirun on
// network namespaces:
//   secret/<file>      the attempt's SSH Secret (keys, authorized_keys, known_hosts)
//   config/<file>      the attempt's ConfigMap (hostfile, ssh_config, sshd_config, scripts)
//   batch/<file>       the job's batch Secret (script, environment, args)
//   pods               one pod name (= host name = Slurm node name) per pod
//   pod<i>.env         pod i's main container env, as `export NAME='value'` lines
//   pod<i>.command     pod i's main container command
//   pod<i>.tools       pod i's tools init container command (the partitions take their tools
//                      from Muster's image, as with the chart's slurm.toolsFromChartImage)
//   batch.init         the batch pod's wait-for-peers init container command
// Usage: muster_slurm_materialize OUT_DIR SCRIPT SUBMIT_DIR [PARTITION]
// PARTITION names the one (default) partition, "batch" unless given: a script that asks for its
// site's partition by name runs unchanged.
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "jobengine/naming.h"
#include "jobengine/slurm/core/script.h"
#include "jobengine/slurm/runtime/runtime.h"
#include "jobengine/slurm/runtime/submit.h"
#include "jobengine/ssh_attempt.h"
#include "proto/codec.h"
#include "proto/json.h"

namespace {

namespace slurm = muster::jobengine::slurm;

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string commandLine(const rapidjson::Value& c) {
  std::string out;
  for (const auto& arg : c["command"].GetArray())
    out += (out.empty() ? "" : " ") + shellQuote(arg.GetString());
  return out;
}

const rapidjson::Value& container(const rapidjson::Value& list, const std::string& name) {
  for (const auto& c : list.GetArray())
    if (c["name"].GetString() == name) return c;
  std::cerr << "no container " << name << "\n";
  std::exit(1);
}

void write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::binary) << text;
  chmod(path.c_str(), mode);
}

int fail(const absl::Status& s) {
  std::cerr << s.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: muster_slurm_materialize OUT_DIR SCRIPT SUBMIT_DIR [PARTITION]\n";
    return 2;
  }
  const std::string out = argv[1], script_path = argv[2], submit_dir = argv[3];
  const std::string partition = argc == 5 ? argv[4] : "batch";
  std::ifstream in(script_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();

  auto config = slurm::parseSlurmSection(R"(
slurm:
  clusterName: netns
  partitions:
  - name: )" + partition + R"(
    template:
      spec:
        containers: [{name: main, image: "debian:12"}]
)");
  if (!config.ok()) return fail(config.status());
  slurm::SubmitContext ctx;
  ctx.ns = "default";
  ctx.user = "tester";
  ctx.submit_host = "login";
  ctx.submit_dir = submit_dir;
  ctx.script = text.str();
  ctx.script_path = script_path;
  ctx.now = absl::Now();
  // The submission environment, as sbatch on a login node would capture it.
  for (const char* name : {"PATH", "LANG", "OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"})
    if (const char* v = std::getenv(name)) ctx.environment[name] = v;
  auto directives = slurm::parseBatchScript(ctx.script, script_path);
  if (!directives.ok()) return fail(directives.status());
  auto from_script = slurm::parseScriptOptions(*directives);
  if (!from_script.ok()) return fail(from_script.status());
  auto options = slurm::resolveBatchOptions(*from_script, {}, {});
  if (!options.ok()) return fail(options.status());
  options->positional = {script_path};  // as `sbatch SCRIPT` (the default job name)
  auto submission = slurm::buildSubmission(*options, *config, ctx, 101);
  if (!submission.ok()) return fail(submission.status());
  muster::proto::ParallelJob job;
  if (auto s = muster::proto::decodeJson(muster::proto::encode(submission->job), &job); !s.ok())
    return fail(s);
  job.meta.uid = "0b7e3a52-9d1c-4d0e-8f43-5a2f1c9e7d10";

  muster::jobengine::RuntimeOptions options_rt;
  options_rt.slurm = *config;
  options_rt.slurm.tools_image = "muster.local/muster:dev";
  slurm::SlurmRuntime runtime(options_rt);
  const std::string group = muster::jobengine::groupName(job.meta.name, 0);
  muster::jobengine::AttemptInfo attempt{0, group, muster::jobengine::secretNamePrefix(group) + "x7k2p"};

  mkdir(out.c_str(), 0755);
  for (const char* d : {"/secret", "/config", "/batch"}) mkdir((out + d).c_str(), 0755);
  auto support = runtime.buildSupport(job, attempt);
  if (!support.ok()) return fail(support.status());
  for (const auto& obj : *support) {
    auto doc = muster::proto::parseJson(obj.body);
    if (!doc.ok()) return fail(doc.status());
    // Modes as the pod's volumes give them (SSH Secret 0400, ConfigMap 0555; slurm_ssh_test.sh
    // adds group read, as the kubelet does for the pod's fsGroup).
    if (doc->HasMember("stringData"))
      for (const auto& kv : (*doc)["stringData"].GetObject())
        write(out + "/secret/" + kv.name.GetString(), kv.value.GetString(),
              muster::jobengine::kSshSecretMode);
    if (doc->HasMember("data"))
      for (const auto& kv : (*doc)["data"].GetObject())
        write(out + "/config/" + kv.name.GetString(), kv.value.GetString(), 0555);
  }
  for (const auto& [name, value] : submission->batch.string_data)
    write(out + "/batch/" + name, value, 0444);

  std::string pods;
  for (int i = 0; i < job.spec.num_pods; ++i) {
    auto body = runtime.buildPod(job, attempt, i);
    if (!body.ok()) return fail(body.status());
    auto doc = muster::proto::parseJson(*body);
    if (!doc.ok()) return fail(doc.status());
    const auto& spec = (*doc)["spec"];
    pods += std::string(spec["hostname"].GetString()) + "\n";
    const auto& main = container(spec["containers"], "main");
    std::string env;
    for (const auto& e : main["env"].GetArray())
      env += std::string("export ") + e["name"].GetString() + "=" + shellQuote(e["value"].GetString()) + "\n";
    write(out + "/pod" + std::to_string(i) + ".env", env, 0644);
    write(out + "/pod" + std::to_string(i) + ".command", commandLine(main) + "\n", 0644);
    write(out + "/pod" + std::to_string(i) + ".tools",
          commandLine(container(spec["initContainers"], "muster-slurm-tools")) + "\n", 0644);
    if (i == 0 && job.spec.num_pods > 1)
      write(out + "/batch.init",
            commandLine(container(spec["initContainers"], "muster-wait-workers")) + "\n", 0644);
  }
  write(out + "/pods", pods, 0644);
  return 0;
}
