#!/usr/bin/env bash
# Every program's --help: exit status 0, the usage on stdout, and every option the program's parser
# takes named in it. The options are read from the parsers' sources, so an option added to a parser
# and not to its usage (or dropped from the usage) fails here:
#   muster-scheduler, musterctl, muster-topology, muster-slurm's global options, scancel, sinfo,
#   scontrol: the `a == "--x"` / `value("--x")` words of the parsing function;
#   sbatch, srun: the kSpecs table of jobengine/slurm/core/options.cc (their usage is made from it);
#   squeue: the kValued, kFlags and kLongFlags tables of parseSqueueArgs;
#   sacct: the kOptions table of parseSacctArgs.
# scontrol also accepts and ignores any other option before its command: the ones scontrol.h names
# are kept in this file (kScontrolIgnored below), as no parser lists them.
#
# muster-slurm-steps (the job pods' tools) gives srun and scontrol the same checks.
#
# Usage: cli_help_test.sh SOURCE_DIR MUSTER_SCHEDULER MUSTERCTL MUSTER_TOPOLOGY MUSTER_SLURM
#                         MUSTER_SLURM_STEPS
set -u

if [ $# -ne 6 ]; then
  echo "usage: cli_help_test.sh SOURCE_DIR MUSTER_SCHEDULER MUSTERCTL MUSTER_TOPOLOGY MUSTER_SLURM" \
       "MUSTER_SLURM_STEPS" >&2
  exit 2
fi
SRC=$1 SCHEDULER=$2 MUSTERCTL=$3 TOPOLOGY=$4 SLURM=$5 STEPS=$6

kScontrolIgnored="-a --all -d --details -F --future -o --oneliner -Q --quiet -v --verbose"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The words `a == "-x"`, `a == "--xyz"` and `value("--xyz"` between the first line matching START
# and the next matching END of FILE, one per line.
parser_words() {  # FILE START END
  sed -n "/$2/,/$3/p" "$SRC/$1" |
    grep -oE '(value\("|== ")-{1,2}[A-Za-z][A-Za-z0-9_-]*"' |
    sed -E 's/^(value\("|== ")//; s/"$//' | sort -u
}

# sbatch's or srun's options: the kSpecs rows whose program is PROGRAM (Sbatch or Srun) or Both.
spec_options() {  # PROGRAM
  sed -n '/constexpr std::array kSpecs = {/,/^};/p' "$SRC/jobengine/slurm/core/options.cc" |
    sed -nE "s/^ *Spec\\{\"([^\"]+)\", [NRO], ('(.)'|0), k($1|Both),.*/\\1 \\3/p" |
    while read -r long short; do
      echo "--$long"
      [ -n "$short" ] && echo "-$short"
    done | sort -u
}

squeue_options() {
  local body
  body=$(sed -n '/^absl::StatusOr<SqueueOptions> parseSqueueArgs/,/for (size_t i = 0; i < args.size/p' \
    "$SRC/jobengine/slurm/cli/job_view.cc")
  # {'o', "format"}: -o and --format, in kValued and kFlags.
  grep -oE "\\{'.', \"[A-Za-z-]+\"\\}" <<<"$body" | sed -E "s/^\\{'(.)', \"([A-Za-z-]+)\"\\}$/-\\1\\n--\\2/"
  # kLongFlags: "noheader", "long", ...
  sed -n '/kLongFlags\[\] = {/,/};/p' <<<"$body" | grep -oE '"[A-Za-z-]+"' | tr -d '"' | sed 's/^/--/'
}

sacct_options() {
  # {"jobs", 'j', true}: --jobs and -j; '\0' for no letter.
  sed -n '/static constexpr Option kOptions\[\] = {/,/};/p' "$SRC/jobengine/slurm/cli/acct.cc" |
    grep -oE "\\{\"[a-z0-9-]+\", '[^']+', (true|false)\\}" |
    sed -E "s/^\\{\"([a-z0-9-]+)\", '([^']+)'.*/\\1 \\2/" |
    while read -r long short; do
      echo "--$long"
      [ "$short" != '\0' ] && echo "-$short"
    done | sort -u
}

# Runs COMMAND... --help (ARGV0 names it in messages) and checks status, stdout and that each of
# OPTIONS (a newline- or space-separated list, at least MIN of them) is a word of the usage.
check_help() {  # NAME MIN OPTIONS COMMAND...
  local name=$1 min=$2 options=$3
  shift 3
  local out="$WORK/out" err="$WORK/err" rc
  env -i PATH="$PATH" HOME="$WORK" "$@" --help >"$out" 2>"$err" </dev/null
  rc=$?
  [ "$rc" -eq 0 ] || fail "$name --help exited $rc (stderr: $(head -c 300 "$err"))"
  [ -s "$out" ] || fail "$name --help printed nothing on stdout"
  local count=0 option
  for option in $options; do
    count=$((count + 1))
    grep -qE -- "(^|[^[:alnum:]_-])$option([^[:alnum:]_-]|\$)" "$out" ||
      fail "$name --help does not name $option, which its parser takes"
  done
  [ "$count" -ge "$min" ] ||
    fail "$name: only $count options read from its parser (at least $min expected): has the parser changed shape?"
  echo "ok: $name --help (exit $rc, $(wc -l <"$out") lines, $count options named)"
}

# -h is --help for these: the same usage.
check_dash_h() {  # NAME COMMAND...
  local name=$1
  shift
  env -i PATH="$PATH" HOME="$WORK" "$@" --help >"$WORK/long" 2>/dev/null </dev/null
  env -i PATH="$PATH" HOME="$WORK" "$@" -h >"$WORK/short" 2>/dev/null </dev/null
  local rc=$?
  [ "$rc" -eq 0 ] || fail "$name -h exited $rc"
  cmp -s "$WORK/long" "$WORK/short" || fail "$name -h does not print what --help prints"
}

check_help muster-scheduler 10 \
  "$(parser_words scheduler/cmd/main.cc '^int run(int argc' '^  ProcessConfig config;')" "$SCHEDULER"
check_dash_h muster-scheduler "$SCHEDULER"
check_help musterctl 7 \
  "$(parser_words proto/cmd/musterctl.cc '^int run(int argc' 'if (command != "nodes"')" "$MUSTERCTL"
check_dash_h musterctl "$MUSTERCTL"
check_help muster-topology 20 \
  "$(parser_words topology/cmd/main.cc '^int run(int argc' 'if (f.command == "agent")')" "$TOPOLOGY"
check_dash_h muster-topology "$TOPOLOGY"
for command in agent show rdma-conf device-plugin version; do
  check_help "muster-topology $command" 0 "" "$TOPOLOGY" "$command"
done
check_help muster-slurm 5 \
  "$(parser_words jobengine/slurm/cli/cli.cc '^absl::StatusOr<Invocation> parseInvocation' '^}')" "$SLURM"
check_dash_h muster-slurm "$SLURM"

# The Slurm commands as users call them: symlinks named after them.
mkdir "$WORK/bin"
for command in sbatch srun squeue scancel sinfo sacct scontrol; do
  ln -s "$SLURM" "$WORK/bin/$command"
done
check_help sbatch 100 "$(spec_options Sbatch)" "$WORK/bin/sbatch"
check_dash_h sbatch "$WORK/bin/sbatch"
check_help srun 100 "$(spec_options Srun)" "$WORK/bin/srun"
check_dash_h srun "$WORK/bin/srun"
check_help squeue 40 "$(squeue_options | sort -u)" "$WORK/bin/squeue"
check_help scancel 30 \
  "$(parser_words jobengine/slurm/cli/jobs_cli.cc '^int scancelMain' 'if (ids.empty() && !any_filter)')" \
  "$WORK/bin/scancel"
check_help sinfo 35 \
  "$(parser_words jobengine/slurm/cli/node_view.cc '^absl::StatusOr<SinfoOptions> parseSinfoArgs' '^}')" \
  "$WORK/bin/sinfo"
check_help sacct 60 "$(sacct_options)" "$WORK/bin/sacct"
check_dash_h sacct "$WORK/bin/sacct"
check_help scontrol 15 \
  "$(parser_words jobengine/slurm/steps/scontrol.cc '^int scontrolMain' '^}') $kScontrolIgnored" \
  "$WORK/bin/scontrol"
check_dash_h scontrol "$WORK/bin/scontrol"
# The same through muster-slurm COMMAND.
check_help "muster-slurm squeue" 0 "" "$SLURM" squeue
# install-tools takes a directory: --help prints its usage and installs nothing (it once installed
# the tools into ./--help).
(failures=0; cd "$WORK" && check_help "muster-slurm install-tools" 0 "DIR" "$SLURM" install-tools
 exit $((failures > 0))) || fail "muster-slurm install-tools --help (above)"
[ ! -e "$WORK/--help" ] || fail "muster-slurm install-tools --help installed into a directory named --help"

# The job pods' binary: its own usage, and srun and scontrol through links to it.
check_help muster-slurm-steps 0 "" "$STEPS"
mkdir "$WORK/steps"
for command in srun scontrol; do
  ln -s "$STEPS" "$WORK/steps/$command"
done
check_help "srun (muster-slurm-steps)" 100 "$(spec_options Srun)" "$WORK/steps/srun"
check_dash_h "srun (muster-slurm-steps)" "$WORK/steps/srun"
check_help "scontrol (muster-slurm-steps)" 15 \
  "$(parser_words jobengine/slurm/steps/scontrol.cc '^int scontrolMain' '^}') $kScontrolIgnored" \
  "$WORK/steps/scontrol"
(failures=0; cd "$WORK" && check_help "muster-slurm-steps install-tools" 0 "DIR" "$STEPS" install-tools
 exit $((failures > 0))) || fail "muster-slurm-steps install-tools --help (above)"
[ ! -e "$WORK/--help" ] || fail "muster-slurm-steps install-tools --help installed into a directory named --help"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all --help checks passed"
