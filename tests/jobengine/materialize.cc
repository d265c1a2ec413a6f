// Writes what the mpi-openmpi runtime generates for a 3-pod job (the seed's mpi-sample-job in
// namespace "default") to a directory, for mpi_ssh_test.sh to run with the real sshd and mpirun:
//   secret/<file>    the Secret's data (keys, authorized_keys, known_hosts)
//   config/<file>    the ConfigMap's data (hostfile, ssh_config, sshd_config, scripts)
//   hosts            one FQDN per pod, index order (the hostfile's names)
//   pods             one pod name (= hostname) per pod
//   launcher.env     the launcher main container's env, as `export NAME='value'` lines
//   launcher.init    the launcher's wait-for-workers init container command
//   worker.command   the worker main container's command
#include <sys/stat.h>

#include <fstream>
#include <iostream>
#include <string>

#include "jobengine/mpi_openmpi.h"
#include "jobengine/naming.h"
#include "proto/codec.h"
#include "proto/json.h"

namespace {

using muster::jobengine::AttemptInfo;
using muster::jobengine::OpenMpiRuntime;

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

const rapidjson::Value& container(const rapidjson::Value& list, const std::string& name) {
  for (const auto& c : list.GetArray())
    if (c["name"].GetString() == name) return c;
  std::cerr << "no container " << name << "\n";
  std::exit(1);
}

std::string commandLine(const rapidjson::Value& c) {
  std::string out;
  for (const auto& arg : c["command"].GetArray()) out += (out.empty() ? "" : " ") + shellQuote(arg.GetString());
  return out;
}

bool write(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  return chmod(path.c_str(), mode) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: muster_jobengine_materialize OUT_DIR NUM_PODS\n";
    return 2;
  }
  const std::string out = argv[1];
  const int num_pods = std::atoi(argv[2]);
  const std::string job_json =
      R"({"apiVersion":"preferred.jp/v1alpha1","kind":"ParallelJob","metadata":{"name":"mpi-sample-job",)"
      R"("namespace":"default","uid":"0b7e3a52-9d1c-4d0e-8f43-5a2f1c9e7d10"},"spec":{"runtimeRef":{"name":"mpi-openmpi"},)"
      R"("numPods":)" + std::to_string(num_pods) + R"(,"numProcPerPod":2,"failurePolicy":{"maxRestarts":3},)"
      R"("launcher":{"spec":{"containers":[{"name":"main","image":"ghcr.io/pfnet/parallel-controller/openmpi:v0.1.0",)"
      R"("command":["sh","-c","mpirun --allow-run-as-root ./hello_mpi"]}]}}}})";
  muster::proto::ParallelJob job;
  if (auto s = muster::proto::decodeJson(job_json, &job); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  OpenMpiRuntime runtime(muster::jobengine::RuntimeOptions{});
  const std::string group = muster::jobengine::groupName(job.meta.name, 0);
  AttemptInfo attempt{0, group, muster::jobengine::secretNamePrefix(group) + "x7k2p"};

  mkdir(out.c_str(), 0755);
  mkdir((out + "/secret").c_str(), 0755);
  mkdir((out + "/config").c_str(), 0755);
  auto secret = runtime.secretFiles(job, attempt);
  if (!secret.ok()) {
    std::cerr << secret.status() << "\n";
    return 1;
  }
  // Modes as the pod's volumes give them (defaultMode 0400 / 0555; mpi_ssh_test.sh adds group
  // read for a non-root "pod", as the kubelet does for the pod's fsGroup).
  for (const auto& [name, text] : *secret)
    write(out + "/secret/" + name, text, muster::jobengine::kSshSecretMode);
  for (const auto& [name, text] : runtime.configFiles(job, attempt))
    write(out + "/config/" + name, text, 0555);

  std::string hosts, pods, env, init, worker;
  for (int i = 0; i < num_pods; ++i) {
    auto body = runtime.buildPod(job, attempt, i);
    if (!body.ok()) {
      std::cerr << body.status() << "\n";
      return 1;
    }
    auto doc = muster::proto::parseJson(*body);
    if (!doc.ok()) return 1;
    const auto& spec = (*doc)["spec"];
    const std::string name = spec["hostname"].GetString();
    pods += name + "\n";
    hosts += muster::jobengine::podFqdn(name, spec["subdomain"].GetString(), "default",
                                        "cluster.local") + "\n";
    if (i == 0) {
      for (const auto& e : container(spec["containers"], "main")["env"].GetArray())
        env += std::string("export ") + e["name"].GetString() + "=" + shellQuote(e["value"].GetString()) + "\n";
      init = commandLine(container(spec["initContainers"], "muster-wait-workers")) + "\n";
    } else if (i == 1) {
      worker = commandLine(container(spec["containers"], "main")) + "\n";
    }
  }
  write(out + "/hosts", hosts, 0644);
  write(out + "/pods", pods, 0644);
  write(out + "/launcher.env", env, 0644);
  write(out + "/launcher.init", init, 0644);
  write(out + "/worker.command", worker, 0644);
  return 0;
}
