#!/usr/bin/env bash
# Builds golangci-lint from the pinned module beside this script (cached
# outside the checkout, like the control-plane binaries) and runs it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version=v2.15.0
cache="${BERTH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/tools}/bin"
bin="$cache/golangci-lint-$version"
if [[ ! -x "$bin" ]]; then
  echo "building golangci-lint $version (first run only)" >&2
  mkdir -p "$cache"
  (cd "$here/lint" && go build -trimpath -o "$bin.tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
  mv "$bin.tmp" "$bin"
fi
cd "$root"
"$bin" run --config "$here/lint/golangci.yml" ./...
# Tool modules with code of their own (not only pinned tools.go imports)
# are held to the same rules; ./... above stops at their go.mod.
for mod in test/tools/images test/tools/release test/tools/dashboard; do
  (cd "$root/$mod" && "$bin" run --config "$here/lint/golangci.yml" ./...)
done
