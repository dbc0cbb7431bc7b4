#!/usr/bin/env bash
# Layer check (CI): arrows point down only. Each top-level module of src/ may import (crate::X)
# only the modules listed for it below; nothing outside web/ and cmd/ imports web, nothing but
# main.rs imports cmd, and `unsafe` appears only under src/engine/sys/. Comments are ignored, and
# so are the crate's macros (`crate::peer_warn!`, the logging layer's rate-limited warning).
#   usage: scripts/check-layers.sh   (exit 1 and a list of offending lines when a rule is broken)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# module -> the modules it may import (besides itself). Lowest layers first.
declare -A allow=(
    [model]=""
    [config]="model"
    [logging]=""
    [cert]=""
    [conn_limit]=""
    [engine]="model"
    [store]="model engine"
    [board]="model engine store"
    [spec]="model engine store board"
    [results]="model engine store board spec"
    [peer]="model engine board spec logging cert conn_limit"
    [runs]="model engine store board spec results peer config logging cert conn_limit"
    [web]="model engine store board spec results runs peer config logging cert conn_limit"
    [cmd]="model engine store board spec results runs peer config logging cert web conn_limit"
)

bad=0
while IFS= read -r f; do
    rel=${f#src/}
    top=${rel%%/*}
    top=${top%.rs}
    case "$top" in lib | main) continue ;; esac
    if [[ -z ${allow[$top]+x} ]]; then
        echo "check-layers: src/$top is not in the layer table (scripts/check-layers.sh)"
        bad=1
        continue
    fi
    # Code lines only: drop // comments (doc comments included) before looking for paths.
    while IFS= read -r hit; do
        line=${hit%%:*}
        dep=$(sed -E 's/.*crate::([a-z_0-9]+).*/\1/' <<<"${hit#*:}")
        [[ $dep == "$top" || $dep == scratch ]] && continue
        if [[ " ${allow[$top]} " != *" $dep "* ]]; then
            echo "check-layers: $f:$line: $top imports $dep (allowed: ${allow[$top]:-nothing})"
            bad=1
        fi
    done < <(sed -E 's#//.*$##' "$f" | grep -noE 'crate::[a-z_0-9]+!?' | grep -v '!$' || true)
done < <(find src -name '*.rs' | sort)

# unsafe only in engine/sys/.
while IFS= read -r hit; do
    case "$hit" in src/engine/sys/*) continue ;; esac
    echo "check-layers: unsafe outside src/engine/sys/: $hit"
    bad=1
done < <(grep -rnE '^\s*[^/]*\bunsafe\b' src --include='*.rs' | grep -v '^\S*:\s*//' || true)

if ((bad)); then
    echo "check-layers: FAILED"
    exit 1
fi
echo "check-layers: ok (layers point down, unsafe only in src/engine/sys/)"
