#!/usr/bin/env bash
# Counts the public items of each crate of the workspace, and of each top-level module of a
# crate, at grep level (no build): the lines that declare an item `pub` without a
# restriction, i.e. that match
#     ^\s*pub (unsafe |const |async |extern "C" )*(fn|struct|enum|trait|type|const|static|mod|use|union|macro)\b
# `pub(crate)`, `pub(super)` and `pub(in ..)` items, public fields and enum variants are not
# counted; a `pub use` line counts once however many names it re-exports. Items of `#[cfg(test)]`
# modules are counted too (there are few). The count is a trend to watch, not an API audit.
#
# A module that `blz` re-exports from `blz-format` is counted in `blz-format`, where it is
# declared; what `blz` passes on of it is listed at the end (its `pub use blz_format::` lines).
#
# Usage: bash tools/public_items.sh [DIR]   (DIR: a checkout, default this one)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

pat='^\s*pub (unsafe |const |async |extern "C" )*(fn|struct|enum|trait|type|const|static|mod|use|union|macro)\b'

# count PATH... -> number of matching lines in the .rs files under the paths
count() {
    { grep -rEh --include='*.rs' "$pat" "$@" 2>/dev/null || true; } | wc -l
}

# crate NAME SRC [EXCLUDED-SUBDIR]: the crate's total, then one line per top-level module
crate() {
    local name=$1 src=$2 skip=${3:-}
    [ -d "$src" ] || return 0
    local files=()
    local entry
    for entry in "$src"/*; do
        [ -n "$skip" ] && [ "$entry" = "$src/$skip" ] && continue
        case $entry in
        *.rs) ;;
        *) [ -d "$entry" ] && [ -n "$(find "$entry" -name '*.rs' -print -quit)" ] || continue ;;
        esac
        files+=("$entry")
    done
    printf '%-12s %5d\n' "$name" "$(count "${files[@]}")"
    for entry in "${files[@]}"; do
        local mod=${entry#"$src"/}
        mod=${mod%.rs}
        printf '  %-20s %5d\n' "$mod" "$(count "$entry")"
    done
}

crate blz src bin
[ -d src/bin/blz ] && crate "blz (bin)" src/bin/blz
crate blz-format crates/blz-format/src
crate blz-cli cli/src
crate blz-python python/src

if [ -f crates/blz-format/src/lib.rs ]; then
    echo "blz re-exports from blz-format:"
    grep -E '^\s*pub use blz_format::' src/lib.rs | sed 's/^ */  /'
fi
