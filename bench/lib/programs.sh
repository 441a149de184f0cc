# Sourced by benches: real programs from the crate registry with workloads that train on one
# corpus and hold out another (work training never saw), all downloaded from the registry.
#
#   program_corpora WORK              the corpora in WORK/corpus: crate sources (ripgrep),
#                                     generated JSON (jaq), the crates' markdown (comrak)
#   program_setup PROGRAM VERSION DIR WORK
#                                     PROGRAM's source in DIR with its pgo-build.toml:
#                                     ripgrep, jaq or comrak

program_fetch() { # name version dir
    mkdir -p "$3"
    [ -d "$3/$1-$2" ] || curl -sSfL "https://static.crates.io/crates/$1/$1-$2.crate" | tar -xz -C "$3"
}

program_corpora() { # work: $work/corpus
    local work=$1
    program_fetch regex-automata 0.4.9 "$work/corpus"
    program_fetch syn 2.0.87 "$work/corpus"
    program_fetch tokio 1.41.1 "$work/corpus"
    program_fetch serde_json 1.0.133 "$work/corpus"
    [ -f "$work/corpus/train.json" ] || python3 - "$work/corpus" <<'PY'
import json, random, sys
for name, seed, n in [("train", 1, 60000), ("holdout", 2, 40000)]:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "Epsilon", "zeta", "Eta", "theta"]
    rows = [{"id": i, "name": rng.choice(words) + str(rng.randrange(100)),
             "score": rng.random() * 100, "tags": rng.sample(words, 3),
             "group": rng.randrange(50), "nested": {"a": rng.randrange(1000), "b": [rng.randrange(10) for _ in range(4)]}}
            for i in range(n)]
    json.dump(rows, open(f"{sys.argv[1]}/{name}.json", "w"))
PY
    local crate
    for crate in rand:0.8.5 clap:4.5.20 hyper:1.5.0 serde:1.0.215; do
        program_fetch "${crate%%:*}" "${crate##*:}" "$work/corpus"
    done
    # Markdown for comrak: training renders changelogs and a design note, the holdout every
    # other document of those crates (READMEs, examples' docs), eight times each.
    [ -f "$work/corpus/train.md" ] || python3 - "$work/corpus" <<'PY'
import glob, sys
corpus = sys.argv[1]
train = [f"{corpus}/tokio-1.41.1/CHANGELOG.md", f"{corpus}/rand-0.8.5/CHANGELOG.md",
         f"{corpus}/tokio-1.41.1/docs/reactor-refactor.md"]
holdout = sorted(p for p in glob.glob(f"{corpus}/*/**/*.md", recursive=True) if p not in train)
for name, files in [("train", train), ("holdout", holdout)]:
    open(f"{corpus}/{name}.md", "w").write("\n\n".join(open(p).read() for p in files) * 8)
PY
}

# The source of PROGRAM VERSION in DIR, with its pgo-build.toml (corpora in WORK/corpus).
program_setup() {
    local program=$1 version=$2 dir=$3 work=$4
    rm -rf "$dir"
    mkdir -p "$dir"
    curl -sSfL "https://static.crates.io/crates/$program/$program-$version.crate" |
        tar -xz -C "$dir" --strip-components 1
    local c="$work/corpus"
    case $program in
    ripgrep)
        local train="$c/regex-automata-0.4.9 $c/syn-2.0.87" holdout="$c/tokio-1.41.1 $c/serde_json-1.0.133"
        cat >"$dir/pgo-build.toml" <<EOF
[build]
bins = ["rg"]

[[workload]]
name = "search-train"
role = "train"
command = 'for i in 1 2 3; do "\$PGO_BUILD_BIN_RG" -j1 -c "fn [a-z_]+\\(" $train; "\$PGO_BUILD_BIN_RG" -j1 -i -c "impl.*for" $train; "\$PGO_BUILD_BIN_RG" -j1 -c -w "[A-Z][a-z]+Error" $train; "\$PGO_BUILD_BIN_RG" -j1 -l "unsafe" $train; done > /dev/null'

[[workload]]
name = "search-holdout"
role = "holdout"
command = 'for i in 1 2; do "\$PGO_BUILD_BIN_RG" -j1 -c "async fn [a-z_]+" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -i -c "poll|waker" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -c "[0-9]+u(8|16|32|64)" $holdout; "\$PGO_BUILD_BIN_RG" -j1 -n -F "Result<" $holdout; done > /dev/null'
EOF
        ;;
    jaq)
        cat >"$dir/pgo-build.toml" <<EOF
[build]
bins = ["jaq"]

[[workload]]
name = "query-train"
role = "train"
command = '"\$PGO_BUILD_BIN_JAQ" -c "[.[] | select(.score > 50) | .name] | length" $c/train.json && "\$PGO_BUILD_BIN_JAQ" -c "group_by(.group) | map({g: .[0].group, n: length, s: (map(.score) | add)})" $c/train.json && "\$PGO_BUILD_BIN_JAQ" -c "map(.tags | join(\",\")) | unique | length" $c/train.json > /dev/null'

[[workload]]
name = "query-holdout"
role = "holdout"
command = '"\$PGO_BUILD_BIN_JAQ" -c "reduce .[] as \\\$r (0; . + \\\$r.nested.a)" $c/holdout.json && "\$PGO_BUILD_BIN_JAQ" -c "[.[] | .name | ascii_downcase] | unique | length" $c/holdout.json && "\$PGO_BUILD_BIN_JAQ" -c "map(select(.tags | index(\"beta\"))) | map(.nested.b | add) | max" $c/holdout.json > /dev/null'
EOF
        ;;
    comrak)
        # Without syntax highlighting (a default feature: syntect and the oniguruma C library),
        # which neither workload asks for.
        python3 - "$dir/Cargo.toml" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r'(default = \[[^\]]*?)\s*"syntect-onig",', r"\1", text, count=1)
open(path, "w").write(text)
PY
        cat >"$dir/pgo-build.toml" <<EOF
[build]
bins = ["comrak"]

[[workload]]
name = "render-train"
role = "train"
command = '"\$PGO_BUILD_BIN_COMRAK" $c/train.md > /dev/null && "\$PGO_BUILD_BIN_COMRAK" -t commonmark $c/train.md > /dev/null'

[[workload]]
name = "render-holdout"
role = "holdout"
command = '"\$PGO_BUILD_BIN_COMRAK" --gfm $c/holdout.md > /dev/null && "\$PGO_BUILD_BIN_COMRAK" --gfm -e footnotes -e description-lists $c/holdout.md > /dev/null'
EOF
        ;;
    *)
        echo "no workloads for $program (bench/lib/programs.sh)" >&2
        exit 2
        ;;
    esac
}
