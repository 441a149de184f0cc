# Sourced by benches: ripgrep_workspace WORK sets up ripgrep 14.1.1 from the crate registry (with
# its Cargo.lock) in WORK, with a pgo-build.toml whose training searches one corpus (the sources
# of regex-automata and syn) and whose holdout searches other patterns in another (tokio and
# serde_json), all downloaded from the crate registry: the holdout is work training never saw.
# Prints the manifest path.
ripgrep_workspace() {
    local work=$1
    fetch() { # name version → $work/corpus/<name>-<version>
        mkdir -p "$work/corpus"
        curl -sSfL "https://static.crates.io/crates/$1/$1-$2.crate" | tar -xz -C "$work/corpus"
    }
    if [ ! -d "$work/ripgrep-14.1.1" ]; then
        curl -sSfL "https://static.crates.io/crates/ripgrep/ripgrep-14.1.1.crate" |
            tar -xz -C "$work"
        fetch regex-automata 0.4.9
        fetch syn 2.0.87
        fetch tokio 1.41.1
        fetch serde_json 1.0.133
    fi
    local train="$work/corpus/regex-automata-0.4.9 $work/corpus/syn-2.0.87"
    local holdout="$work/corpus/tokio-1.41.1 $work/corpus/serde_json-1.0.133"
    cat >"$work/ripgrep-14.1.1/pgo-build.toml" <<EOF
[build]
bins = ["rg"]

[[workload]]
name = "search-train"
role = "train"
command = 'for i in 1 2 3 4 5; do "\$PGO_BUILD_BIN_RG" -j1 -c "fn [a-z_]+\\(" $train; "\$PGO_BUILD_BIN_RG" -j1 -i -c "impl.*for" $train; "\$PGO_BUILD_BIN_RG" -j1 -c -w "[A-Z][a-z]+Error" $train; "\$PGO_BUILD_BIN_RG" -j1 -l "unsafe" $train; done > /dev/null'

[[workload]]
name = "search-holdout"
role = "holdout"
command = 'for i in 1 2 3 4 5 6 7 8; do "\$PGO_BUILD_BIN_RG" -j1 -c "async fn [a-z_]+" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -i -c "poll|waker" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -c "[0-9]+u(8|16|32|64)" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -n -F "Result<" $holdout; done > /dev/null'
EOF
    echo "$work/ripgrep-14.1.1/Cargo.toml"
}

# bench_work: BENCH_WORK=DIR keeps the work files there (a second run reuses every build), else
# a temporary directory removed on exit. Prints the directory.
bench_work() {
    if [ -n "${BENCH_WORK:-}" ]; then
        mkdir -p "$BENCH_WORK"
        echo "$BENCH_WORK"
    else
        mktemp -d
    fi
}
