#!/usr/bin/env bash
# Fails when the checked-in generated files (apis/, config/) differ from what
# `make generate` writes. It generates into a copy of the checkout, never into
# the checkout itself, so it can run while suites compile and read the same
# files (make test runs it in its side lane beside the control-plane suites)
# and a failed run leaves the working tree as it was.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
copy="$(mktemp -d "${TMPDIR:-/tmp}/berth-generate.XXXXXX")"
trap 'rm -rf "$copy"' EXIT

cd "$root"
# The working tree's files that git tracks or would track (new, not ignored).
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$copy"

"${MAKE:-make}" --no-print-directory -C "$copy" generate

# Every file generate left in the copy's apis/ and config/ must be in the
# checkout with the same content; new files are untracked generated files.
stale=()
while IFS= read -r -d '' f; do
  rel="${f#"$copy"/}"
  if [[ ! -f "$root/$rel" ]] || ! cmp -s "$f" "$root/$rel"; then
    stale+=("$rel")
  fi
done < <(find "$copy/apis" "$copy/config" -type f -print0)
if [[ ${#stale[@]} -gt 0 ]]; then
  for rel in "${stale[@]}"; do
    if [[ -f "$root/$rel" ]]; then
      diff -u "$root/$rel" "$copy/$rel" | head -n 40 || true
    else
      echo "new file: $rel"
    fi
  done
  echo "generated files are stale (${stale[*]}): run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
