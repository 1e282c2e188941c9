#!/usr/bin/env bash
# Runs make targets one after another as the phases of a larger target
# (`make test`), times each, and prints a table of the times at the end,
# also when a phase fails, so a change that makes the run slower is seen in
# the same output that shows it passed.
#
# Usage: test/tools/phases.sh BUDGET_SECONDS TARGET...   (0: no budget)
#
# The first failing phase stops the run; the table then marks it and the
# phases that did not run. A total over BUDGET_SECONDS is reported on its own
# line ("over budget") but does not fail the run: the budget is for a machine
# with empty caches, and a test's outcome must not depend on the machine's
# speed. The README's table says what each phase costs cold and warm.
set -uo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 BUDGET_SECONDS TARGET..." >&2
  exit 2
fi
budget="$1"; shift
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "$0: BUDGET_SECONDS must be a whole number of seconds, got '$budget'" >&2
  exit 2
fi

make_cmd="${MAKE:-make}"
names=("$@")
times=()
states=()
failed=""
total_start=$SECONDS
for target in "${names[@]}"; do
  if [[ -n "$failed" ]]; then
    times+=("-"); states+=("not run")
    continue
  fi
  start=$SECONDS
  echo "=== phase $target" >&2
  if "$make_cmd" --no-print-directory "$target"; then
    states+=("ok")
  else
    states+=("FAILED")
    failed="$target"
  fi
  times+=("$((SECONDS - start))")
done
total=$((SECONDS - total_start))

{
  echo
  if (( budget > 0 )); then
    echo "phase times (budget ${budget} s from empty caches; see README.md, \"make test\")"
  else
    echo "phase times"
  fi
  printf '  %-20s %8s  %s\n' phase seconds result
  for i in "${!names[@]}"; do
    printf '  %-20s %8s  %s\n' "${names[$i]}" "${times[$i]}" "${states[$i]}"
  done
  printf '  %-20s %8s  %s\n' total "$total" "$(printf '%d min %02d s' $((total / 60)) $((total % 60)))"
  if (( budget > 0 && total > budget )); then
    echo "  over budget: ${total} s > ${budget} s; the README's table says which phases cost what"
  fi
} >&2

passed=0
for st in "${states[@]}"; do [[ "$st" == ok ]] && passed=$((passed + 1)); done
# The plain closing line CI readers look for: phases passed and failed.
echo "phases: ${passed} passed, $([[ -n "$failed" ]] && echo 1 || echo 0) failed"
if [[ -n "$failed" ]]; then
  echo "phase $failed failed" >&2
  exit 1
fi
