#!/usr/bin/env bash
# Side-by-side criterion runs of two commits on this machine, alternating so both see the same
# load: `bash benches/compare_commits.sh BASE [HEAD] [ROUNDS]` (HEAD defaults to the work tree's
# HEAD, ROUNDS to 2). Builds the `dataset` and `table` benches of each commit in a worktree
# under target/compare/ (each one a release build: ~10 minutes and a few GB), then runs
# base, head, base, head, ... and prints each benchmark's time per run (criterion's `bencher` lines: ns per iteration). Compare medians of
# the same round; the spread between rounds of one commit is the machine's noise.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: compare_commits.sh BASE [HEAD] [ROUNDS]}
head=${2:-HEAD}
rounds=${3:-2}
out=target/compare
mkdir -p "$out"

build() { # rev -> dir holding its bench binaries
    local rev=$1 dir
    dir=$out/$(git rev-parse --short "$rev")
    if [ ! -d "$dir" ]; then
        git worktree add -q --detach "$dir" "$rev"
    fi
    (cd "$dir" && cargo bench --no-run -p blz --bench dataset --bench table >&2)
    echo "$dir"
}

bdir=$(build "$base")
hdir=$(build "$head")
newest() { ls -t "$1"/target/release/deps/"$2"-* | grep -v '\.d$' | head -1; }
for bench in dataset table; do
    for round in $(seq "$rounds"); do
        for which in base head; do
            dir=$bdir
            [ "$which" = head ] && dir=$hdir
            echo "### $bench $which ($(basename "$dir")) round $round"
            "$(newest "$dir" "$bench")" --bench --warm-up-time 1 --measurement-time 3 \
                --output-format bencher 2>/dev/null | grep '^test ' || true
        done
    done
done
