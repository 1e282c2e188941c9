#!/usr/bin/env bash
# Runs make targets as the phases of a larger target (`make test`) in
# lanes that run at the same time, times each phase, and prints a table of
# the times at the end, also when a phase fails, so a change that makes the
# run slower is seen in the same output that shows it passed.
#
# Usage: test/tools/phases.sh BUDGET_SECONDS LANE [LANE...]
#   BUDGET_SECONDS  0: no budget
#   LANE            "NAME: TARGET..." or "NAME@NICE: TARGET..."
#
# Each lane runs its targets one after another, at CPU niceness NICE (0
# when not given). The first lane runs in the foreground; every other lane
# writes its output to a log that is printed when all lanes have ended. Why
# lanes: the suites against a control plane spend most of their time
# waiting for the API server, etcd and controllers — measured, a full-plane
# suite leaves 70–90 % of the machine's two cores idle while it runs — so
# several lanes of suites (each running one plane at a time) share the machine
# well, and CPU-only work (generating, the unit tests, golangci-lint) runs
# in a niced lane that takes what the suites leave and yields the moment a
# suite needs the CPU.
#
# In each lane the first failing phase stops that lane; the other lanes run
# to their end, so one run reports every failure it can. The table marks the
# failed phase and those that did not run. A total over BUDGET_SECONDS is
# reported on its own line ("over budget") but does not fail the run: the
# budget is for a machine with empty caches, and a test's outcome must not
# depend on the machine's speed. The README's table says what each phase
# costs cold and warm.
set -uo pipefail

usage() {
  echo "usage: $0 BUDGET_SECONDS \"NAME[@NICE]: TARGET...\" [\"NAME[@NICE]: TARGET...\"...]" >&2
  exit 2
}
[[ $# -ge 2 ]] || usage
budget="$1"; shift
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "$0: BUDGET_SECONDS must be a whole number of seconds, got '$budget'" >&2
  exit 2
fi
names=() nices=() targets=()
for spec in "$@"; do
  if ! [[ "$spec" =~ ^([a-z0-9-]+)(@([0-9]+))?:(.*)$ ]]; then
    echo "$0: a lane is \"NAME: TARGET...\" or \"NAME@NICE: TARGET...\", got '$spec'" >&2
    exit 2
  fi
  nice="${BASH_REMATCH[3]:-0}"
  if (( nice > 19 )); then
    echo "$0: lane ${BASH_REMATCH[1]}: niceness must be from 0 to 19, got $nice" >&2
    exit 2
  fi
  read -r -a ts <<<"${BASH_REMATCH[4]}"
  if [[ ${#ts[@]} -eq 0 ]]; then
    echo "$0: lane ${BASH_REMATCH[1]} has no targets" >&2
    exit 2
  fi
  for n in "${names[@]}"; do
    if [[ "$n" == "${BASH_REMATCH[1]}" ]]; then
      echo "$0: two lanes are named $n" >&2
      exit 2
    fi
  done
  names+=("${BASH_REMATCH[1]}") nices+=("$nice") targets+=("${ts[*]}")
done

make_cmd="${MAKE:-make}"
work="$(mktemp -d "${TMPDIR:-/tmp}/berth-phases.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# run_lane LANE TARGET...: runs the targets in order, stopping at the first
# failure, and writes one line "TARGET SECONDS RESULT" per target to
# $work/LANE.times.
run_lane() {
  local lane="$1"; shift
  local failed="" target start
  : >"$work/$lane.times"
  for target in "$@"; do
    if [[ -n "$failed" ]]; then
      echo "$target - not-run" >>"$work/$lane.times"
      continue
    fi
    start=$SECONDS
    echo "=== phase $target ($lane lane)" >&2
    if "$make_cmd" --no-print-directory "$target"; then
      echo "$target $((SECONDS - start)) ok" >>"$work/$lane.times"
    else
      echo "$target $((SECONDS - start)) FAILED" >>"$work/$lane.times"
      failed="$target"
    fi
  done
  [[ -z "$failed" ]]
}

total_start=$SECONDS
pids=()
for i in "${!names[@]}"; do
  (( i == 0 )) && continue
  echo "=== ${names[$i]} lane (nice ${nices[$i]}): ${targets[$i]}; its output follows the ${names[0]} lane's" >&2
  # shellcheck disable=SC2086 # the targets are words
  nice -n "${nices[$i]}" bash -c "$(declare -f run_lane); work='$work' make_cmd='$make_cmd' run_lane \"\$@\"" \
    lane "${names[$i]}" ${targets[$i]} >"$work/${names[$i]}.log" 2>&1 &
  pids+=($!)
done
# shellcheck disable=SC2086
nice -n "${nices[0]}" bash -c "$(declare -f run_lane); work='$work' make_cmd='$make_cmd' run_lane \"\$@\"" \
  lane "${names[0]}" ${targets[0]}
echo "=== ${names[0]} lane done after $((SECONDS - total_start)) s; waiting for the other lanes" >&2
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  lane="${names[$((i + 1))]}"
  echo "=== ${lane} lane output (${targets[$((i + 1))]})" >&2
  cat "$work/$lane.log" >&2
done
total=$((SECONDS - total_start))

passed=0
failed=()
{
  echo
  if (( budget > 0 )); then
    echo "phase times (budget ${budget} s from empty caches; see README.md, \"make test\")"
  else
    echo "phase times"
  fi
  printf '  %-20s %-8s %8s  %s\n' phase lane seconds result
  for lane in "${names[@]}"; do
    [[ -f "$work/$lane.times" ]] || continue
    while read -r target secs result; do
      printf '  %-20s %-8s %8s  %s\n' "$target" "$lane" "$secs" "${result/not-run/not run}"
      case "$result" in
        ok) passed=$((passed + 1)) ;;
        FAILED) failed+=("$target") ;;
      esac
    done <"$work/$lane.times"
  done
  printf '  %-20s %-8s %8s  %s\n' total "" "$total" "$(printf '%d min %02d s' $((total / 60)) $((total % 60)))"
  if (( budget > 0 && total > budget )); then
    echo "  over budget: ${total} s > ${budget} s; the README's table says which phases cost what"
  fi
} >&2

# The plain closing line CI readers look for: phases passed and failed.
echo "phases: ${passed} passed, ${#failed[@]} failed"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
