#!/usr/bin/env bash
# Fails when a Go file of the repository lacks the license header of
# hack/boilerplate.go.txt (after its build constraint, if it has one).
# With --fix, adds the header where it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

fix=false
[ "${1:-}" = "--fix" ] && fix=true
marker="Copyright 2026 The Playground Authors."
missing=()
while IFS= read -r f; do
	head -n 20 "$f" | grep -qF "$marker" && continue
	if ! $fix; then
		missing+=("$f")
		continue
	fi
	tmp=$(mktemp)
	if head -n 1 "$f" | grep -q '^//go:build '; then
		{ head -n 1 "$f"; echo; cat hack/boilerplate.go.txt; echo; tail -n +2 "$f" | sed '1{/^$/d}'; } >"$tmp"
	else
		{ cat hack/boilerplate.go.txt; echo; cat "$f"; } >"$tmp"
	fi
	cat "$tmp" >"$f"
	rm -f "$tmp"
done < <(git ls-files '*.go')

if [ ${#missing[@]} -gt 0 ]; then
	echo "verify-boilerplate: these Go files lack the license header of hack/boilerplate.go.txt (hack/verify-boilerplate.sh --fix adds it):" >&2
	printf '  %s\n' "${missing[@]}" >&2
	exit 1
fi
