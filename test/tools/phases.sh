#!/usr/bin/env bash
# Runs make targets as the phases of a larger target (`make test`) in two
# lanes, times each, and prints a table of the times at the end, also when a
# phase fails, so a change that makes the run slower is seen in the same
# output that shows it passed.
#
# Usage: test/tools/phases.sh BUDGET_SECONDS "MAIN TARGETS" ["SIDE TARGETS"]
#        (BUDGET_SECONDS 0: no budget)
#
# The main lane runs its targets one after another in the foreground. The
# side lane, when given, runs its targets one after another at the same time,
# at CPU niceness PHASES_SIDE_NICE (default 19), with its output in a log
# that is printed when the lane ends. Why two lanes: the suites against a
# control plane spend most of their time waiting for the API server, etcd
# and controllers — measured, about 60 % of the machine's two cores stay idle
# while one runs — and the side lane's phases (the race detector's build and
# the unit tests, golangci-lint) are CPU work that needs no control plane.
# Niced, they take what the suites leave and yield the moment a suite needs
# the CPU, so they cost the run almost nothing instead of a quarter of it.
#
# In each lane the first failing phase stops that lane; the other lane runs
# to its end, so one run reports every failure it can. The table marks the
# failed phase and those that did not run. A total over BUDGET_SECONDS is
# reported on its own line ("over budget") but does not fail the run: the
# budget is for a machine with empty caches, and a test's outcome must not
# depend on the machine's speed. The README's table says what each phase
# costs cold and warm.
set -uo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  echo "usage: $0 BUDGET_SECONDS \"MAIN TARGETS\" [\"SIDE TARGETS\"]" >&2
  exit 2
fi
budget="$1"
read -r -a main_targets <<<"$2"
side_targets=()
if [[ $# -eq 3 ]]; then
  read -r -a side_targets <<<"$3"
fi
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "$0: BUDGET_SECONDS must be a whole number of seconds, got '$budget'" >&2
  exit 2
fi
if [[ ${#main_targets[@]} -eq 0 ]]; then
  echo "$0: no main targets" >&2
  exit 2
fi
side_nice="${PHASES_SIDE_NICE:-19}"
if ! [[ "$side_nice" =~ ^[0-9]+$ ]] || (( side_nice > 19 )); then
  echo "$0: PHASES_SIDE_NICE must be a niceness from 0 to 19, got '$side_nice'" >&2
  exit 2
fi

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
side_pid=""
if [[ ${#side_targets[@]} -gt 0 ]]; then
  echo "=== side lane (nice $side_nice): ${side_targets[*]}; its output follows the main lane's" >&2
  nice -n "$side_nice" bash -c "$(declare -f run_lane); work='$work' make_cmd='$make_cmd' run_lane side \"\$@\"" \
    side "${side_targets[@]}" >"$work/side.log" 2>&1 &
  side_pid=$!
fi
run_lane main "${main_targets[@]}"
main_end=$((SECONDS - total_start))
if [[ -n "$side_pid" ]]; then
  echo "=== main lane done after ${main_end} s; waiting for the side lane" >&2
  wait "$side_pid"
  echo "=== side lane output (${side_targets[*]})" >&2
  cat "$work/side.log" >&2
fi
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
  printf '  %-20s %-5s %8s  %s\n' phase lane seconds result
  for lane in main side; do
    [[ -f "$work/$lane.times" ]] || continue
    while read -r target secs result; do
      printf '  %-20s %-5s %8s  %s\n' "$target" "$lane" "$secs" "${result/not-run/not run}"
      case "$result" in
        ok) passed=$((passed + 1)) ;;
        FAILED) failed+=("$target") ;;
      esac
    done <"$work/$lane.times"
  done
  printf '  %-20s %-5s %8s  %s\n' total "" "$total" "$(printf '%d min %02d s' $((total / 60)) $((total % 60)))"
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
