#!/usr/bin/env bash
# Counts the public items of each crate of the workspace, and of each top-level module of a
# crate, at grep level (no build): the lines that declare an item `pub` without a
# restriction, i.e. that match
#     ^\s*pub (unsafe |const |async |extern "C" )*(fn|struct|enum|trait|type|const|static|mod|use|union|macro)\b
# `pub(crate)`, `pub(super)` and `pub(in ..)` items, public fields and enum variants are not
# counted; a `pub use` line counts once however many names it re-exports. Test code is not
# counted: neither `#[cfg(test)] mod NAME { ... }` blocks nor files compiled only under
# `cfg(test)` (declared `#[cfg(test)] mod NAME;`). The CLI is a binary (`blz-cli`): nothing of
# it is a library user's, and it is not counted. The count is a trend to watch, not an API
# audit.
#
# A module that `blz` re-exports from `blz-format` is counted in `blz-format`, where it is
# declared; what `blz` passes on of it is listed at the end (its `pub use blz_format::` lines).
#
# Usage: bash tools/public_items.sh [DIR]   (DIR: a checkout, default this one)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

pat='^\s*pub (unsafe |const |async |extern "C" )*(fn|struct|enum|trait|type|const|static|mod|use|union|macro)\b'

# The .rs files under PATH..., without the files compiled only under cfg(test).
rust_files() {
    local f
    find "$@" -name '*.rs' -type f 2>/dev/null | sort | while read -r f; do
        is_test_only "$f" || echo "$f"
    done
}

# Whether file F is declared `#[cfg(test)] mod NAME;` by its parent (mod.rs/lib.rs/main.rs of
# its directory, or the file of the same name one level up).
is_test_only() {
    local f=$1 dir name parent
    dir=$(dirname "$f")
    name=$(basename "$f" .rs)
    if [ "$name" = mod ]; then
        name=$(basename "$dir")
        dir=$(dirname "$dir")
    fi
    for parent in "$dir/mod.rs" "$dir/lib.rs" "$dir/main.rs" "$dir.rs"; do
        [ -f "$parent" ] && [ "$parent" != "$f" ] || continue
        if awk -v name="$name" '
            /#\[cfg\(test\)\]/ { t = 1; next }
            t && /^[[:space:]]*#\[/ { next }
            t && $0 ~ "^[[:space:]]*(pub(\\([^)]*\\))? )?mod " name ";" { found = 1 }
            { t = 0 }
            END { exit !found }' "$parent"; then
            return 0
        fi
    done
    return 1
}

# The text of the files, without `#[cfg(test)]` inline modules.
without_tests() {
    awk '
        FNR == 1 { skip = 0; t = 0 }
        skip { n = $0; o = gsub(/\{/, "{", n); c = gsub(/\}/, "}", n); depth += o - c
               if (depth <= 0) skip = 0; next }
        /#\[cfg\(test\)\]/ { t = 1; print; next }
        t && /^[[:space:]]*(pub(\([^)]*\))? )?mod [A-Za-z_0-9]+ *\{/ {
            n = $0; o = gsub(/\{/, "{", n); c = gsub(/\}/, "}", n); depth = o - c
            skip = depth > 0; t = 0; next }
        { t = 0; print }' "$@"
}

# count PATH... -> number of matching lines in the .rs files under the paths
count() {
    local files
    mapfile -t files < <(rust_files "$@")
    [ ${#files[@]} -gt 0 ] || { echo 0; return; }
    { without_tests "${files[@]}" | grep -E "$pat" || true; } | wc -l
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
crate blz-object crates/blz-object/src
crate blz-python python/src

if [ -f crates/blz-format/src/lib.rs ]; then
    echo "blz re-exports from blz-format:"
    grep -E '^\s*pub use blz_format::' src/lib.rs | sed 's/^ */  /'
fi
