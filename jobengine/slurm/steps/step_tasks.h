#pragma once

// `muster-slurm step-tasks`: runs one node's share of an srun step (what slurmstepd does in
// Slurm). srun starts it through `<MUSTER_SLURM_RSH...> <node> <MUSTER_SLURM_BIN> step-tasks`
// (or directly, for srun's own node) and talks to it with the step protocol
// (step_protocol.h) over its stdin and stdout.
//
// What it does:
//   - writes the Hello frame, then reads one Request;
//   - starts every task of the request: its own process group (setpgid), stdin /dev/null, the
//     request's cwd (if that fails: a Message "couldn't chdir to `X': ...: going to /tmp
//     instead" and /tmp, as slurmstepd does), exactly the request's environment (common entries
//     overlaid with the task's own), argv[0] searched in that environment's PATH (execvp's rules,
//     without execvp reading this process's PATH). A task that cannot be executed gets a Message
//     "execve(): <argv0>: <strerror>" and an Exit with code errno (slurmstepd's _exit(errno));
//   - sends each task's stdout and stderr as it comes, line by line (several whole lines per
//     frame; a line longer than kMaxOutputChunk in pieces; the last unterminated line when the
//     stream ends);
//   - reports each task's end (Exit: code, signal, core dump) as its leader is reaped, after
//     what it had written;
//   - Signal frames are delivered to every task's process group; a Terminate frame, the end of
//     its input (srun or the connection died), a failed write to srun, or SIGTERM/SIGINT/SIGHUP
//     to step-tasks itself start the termination: SIGCONT and SIGTERM to every task's group,
//     SIGKILL after the request's kill_wait_ms. With kill_on_bad_exit, a task ending with a
//     non-zero code or a signal starts it for the others;
//   - when every task leader is reaped, whatever is left of the tasks (processes in their
//     groups, and orphans, which it adopts as a child subreaper) is SIGKILLed: no task outlives
//     its step. Then it sends Done and returns 0.
// Returns 2 when the request cannot be read (a note is written to err_fd and, when possible, as
// a Message).

namespace muster::jobengine::slurm {

int stepTasksMain(int in_fd, int out_fd, int err_fd = 2);

}  // namespace muster::jobengine::slurm
