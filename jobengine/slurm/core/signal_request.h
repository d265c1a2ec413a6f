#pragma once

// scancel --signal, from the command line to the batch step:
//
//   scancel --signal=USR1 [-b | -f] 42
//       -> spec.slurm.signal {seq: <last seq + 1>, number: 10, target: steps|batch|full}
//   the job engine (SlurmRuntime::podAnnotations)
//       -> the batch pod's annotation muster.dev/slurm-signal "<seq>:<number>:<target>"
//   the kubelet (a downward API volume, within its sync period: about a minute)
//       -> the file $MUSTER_SLURM_SIGNAL_FILE in the batch pod
//   batch-step (batch_step.h), which delivers each seq once, as slurmstepd does:
//       steps  every srun step running on the batch node (srun forwards it to its tasks on every
//              node), not the batch shell: scancel's default;
//       batch  the batch shell alone (-b), which can trap it;
//       full   the batch script's whole process group (-f): the shell, srun and their children.
// A request already in the file when the batch script starts is not delivered: it was asked of
// an earlier run, or before this run had anything to signal.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace muster::jobengine::slurm {

// "USR1", "SIGUSR1", "usr1" or a number 1-64 -> the signal's number (Linux); nullopt otherwise.
std::optional<int> parseSignalName(std::string_view name);

struct SignalRequest {
  int64_t seq = 0;
  int number = 0;
  std::string target = "steps";  // steps, batch, full
  bool operator==(const SignalRequest&) const = default;
};

// "<seq>:<number>:<target>".
std::string formatSignalRequest(const SignalRequest& request);
// nullopt for anything else (an empty file: no request yet).
std::optional<SignalRequest> parseSignalRequest(std::string_view text);

}  // namespace muster::jobengine::slurm
