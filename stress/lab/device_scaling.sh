#!/usr/bin/env bash
# device_scaling.sh - every many-core measurement of the scaling floors in one run, for the
# lent 16-core machine (no network; gcc; the free-threaded Python comes in .device/).
#
# Here, first (from the project root; .device/ is ignored by git):
#     ../shared/device/ft-bundle atomics ./stress/lab  # interpreter + this checkout, its lab
#                                                      # (the harness's baselines) + the harness's clock
# There (the device tool runs bash in the repository root with $OUT set; carry .device):
#     bash stress/lab/device_scaling.sh
# Here, to try it on 2 cores with small sizes:
#     OUT=/tmp/x DEVICE_SECONDS=0.2 THREADS=1,2 HARNESS_OPS=20000 MIX_DURATION=0.3 \
#         bash stress/lab/device_scaling.sh
#
# Steps, each under its own `timeout`, all output under $OUT (one .txt per step):
#   machine       CPU, kernel, gcc, load, the source fingerprint  -> machine.txt
#   bundle        checks that /tmp/cstrie-ft (where .device/ft-run unpacks) holds THIS
#                 bundle's cstrie (a machine kept warm from an earlier call may hold an
#                 older one: it is removed and unpacked again), and that importing
#                 cstrie leaves the GIL off                       -> bundle.txt
#   build         make -C stress scale (gcc -O2)                  -> build.txt
#   engine        stress/bin/scale_engine, every row at THREADS    -> engine.txt, engine.jsonl
#   engine-unpadded  the update rows at 1 and N threads with no I-node padded
#                 (-DCST_PAD_LEVELS=0, native/nodes.h): what false sharing costs -> .txt
#   python        python -m stress.lab.scaling, every row at THREADS   -> python.txt, python.jsonl
#   harness-90-10 python -m stress.harness --mix 90/10 at 1 and N threads, per-thread
#                 matcher beside its baselines (throughput only)  -> harness-90-10.{txt,json}
#   harness-50-50 the same at 50/50                                -> harness-50-50.{txt,json}
#   linearizability  python -m stress.harness at N threads, HARNESS_OPS ops each, 80/20
#                 with a snapshot every 2,000 ops, recorded and checked (.ci/ft-test's
#                 run at N threads instead of 2)                   -> linearizability.{txt,json}
#   probes        python -m stress.harness.probes --threads N      -> probes.txt
#   summary       each row's speedup and efficiency at N, the issue-24 floors, the
#                 checks' verdict, every step's exit status         -> summary.txt, stdout
#                 and the rows as docs/benchmarks.md's tables       -> tables.md
# (N = the largest of THREADS.)  scaling.png is drawn there only if the Python that
# summarises (the machine's python3, else the bundle's) has matplotlib (the bundle has
# not: with it, it is 37 MB instead of 6); otherwise, here:
#     python -m stress.lab.scaling --from-json OUT/engine.jsonl OUT/python.jsonl --plot scaling.png
#
# Knobs (environment):
#   DEVICE_SECONDS  seconds per measured run (default 0.5)
#   DEVICE_REPEAT   runs per (row, thread count), the best kept (default 1)
#   THREADS         thread counts (default 1,2,4,... up to nproc, and nproc)
#   HARNESS_OPS     ops per thread of the linearizability run (default 120000: ~1.9M ops at
#                   16 threads, about a minute recorded and checked)
#   MIX_DURATION    seconds per harness throughput run (default 1)
#   BUDGET_S        the whole script's wall budget (default 480): a step gets at most what
#                   is left (less 20 s kept for the summary) and is skipped under 15 s
# Expected on 16 cores with the defaults: about 4 minutes.  Exit status: 0 when every
# step ran and exited 0, 1 otherwise (the summary says which).

set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the output directory (the device tool sets it)}"
mkdir -p "$OUT"

S=${DEVICE_SECONDS:-0.5}
R=${DEVICE_REPEAT:-1}
NCPU=$(nproc)
if [[ -z "${THREADS:-}" ]]; then
    THREADS=1
    for ((n = 2; n <= NCPU; n *= 2)); do THREADS+=",$n"; done
    [[ ",$THREADS," == *",$NCPU,"* ]] || THREADS+=",$NCPU"
fi
NMAX=$(tr ',' '\n' <<<"$THREADS" | sort -n | tail -1)
NCOUNTS=$(tr ',' '\n' <<<"$THREADS" | sort -nu | grep -c .)
[[ ",$THREADS," == *",1,"* ]] || NCOUNTS=$((NCOUNTS + 1)) # 1 is always measured
HARNESS_OPS=${HARNESS_OPS:-120000}
MIX_DURATION=${MIX_DURATION:-1}
BUDGET_S=${BUDGET_S:-480}
FT=(bash .device/ft-run)
START=$SECONDS
STEPS="$OUT/steps.tsv"
printf 'step\texit\tseconds\tlimit\n' >"$STEPS"
failed=0

# step NAME MAX_SECONDS CMD...: run CMD under timeout (MAX_SECONDS, or what the budget
# leaves), stdout+stderr to $OUT/NAME.txt; one status line here, one row in steps.tsv.
step() {
    local name=$1 max=$2
    shift 2
    local left=$((BUDGET_S - (SECONDS - START) - 20))
    local limit=$((max < left ? max : left))
    if ((limit < 15)); then
        printf '%s\tskipped\t0\t%s\n' "$name" "$limit" >>"$STEPS"
        echo "[$((SECONDS - START))s] $name: SKIPPED (budget: ${left}s left)"
        failed=1
        return 1
    fi
    local t0=$SECONDS rc=0
    echo "[$((SECONDS - START))s] $name (limit ${limit}s): $*"
    timeout -k 10 "$limit" "$@" >"$OUT/$name.txt" 2>&1 || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" "$limit" >>"$STEPS"
    if ((rc != 0)); then
        failed=1
        echo "    exit $rc$( ((rc == 124)) && echo ' (timed out)'); last lines of $name.txt:"
        tail -n 5 "$OUT/$name.txt" | sed 's/^/    | /'
    fi
    return "$rc"
}

# seconds a measured step may take: twice its runs x (run seconds + set-up), plus
# start-up: ROWS COUNTS_PER_ROW RUN_SECONDS SETUP_SECONDS START_SECONDS
limit_for() {
    awk -v rows="$1" -v c="$2" -v r="$R" -v s="$3" -v setup="$4" -v start="$5" \
        'BEGIN { printf "%d", rows * c * r * (s + setup) * 2 + start }'
}

echo "device_scaling: $NCPU CPUs, threads $THREADS, ${S}s per run, best of $R, OUT=$OUT"

# -- machine --------------------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nproc: $NCPU"
    grep -m1 'model name' /proc/cpuinfo || true
    lscpu 2>/dev/null | grep -E '^(Architecture|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|Model name|L2|L3)' || true
    uname -srm
    (. /etc/os-release 2>/dev/null && echo "os: $PRETTY_NAME") || true
    free -g 2>/dev/null | head -2 || true
    echo "gcc: $(gcc --version 2>/dev/null | head -1)"
    echo "load average: $(cat /proc/loadavg)"
    echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo 'no .git here')"
    echo "sources (sha256 of native/*.[ch] stress/scale_engine.c stress/lab/scaling.py): $(
        cat native/*.c native/*.h stress/scale_engine.c stress/lab/scaling.py | sha256sum | cut -c1-16)"
    if [[ -f .device/ft-bundle.tar.xz ]]; then
        newer=$(find native cstrie stress/lab/cstrie_lab -newer .device/ft-bundle.tar.xz -type f 2>/dev/null | head -5)
        [[ -z "$newer" ]] || echo "WARNING: changed after the bundle was made (rerun ft-bundle): $newer"
    fi
} >"$OUT/machine.txt" 2>&1
grep -E 'model name|^os:|^git:|^WARNING' "$OUT/machine.txt"

# -- bundle ---------------------------------------------------------------------------
check_bundle() {
    [[ -f .device/ft-bundle.tar.xz && -f .device/ft-run ]] || {
        echo "no .device/ft-bundle.tar.xz: run ../shared/device/ft-bundle atomics ./stress/lab here first"
        return 2
    }
    # ft-run unpacks into /tmp/cstrie-ft only when no interpreter is there: a warm
    # machine may hold an earlier bundle.  Compare cstrie's RECORD (the sha256 of each
    # installed file, the built engine included) with this bundle's.
    local want have
    want=$(tar -xJOf .device/ft-bundle.tar.xz --wildcards 'site/cstrie-*.dist-info/RECORD' | sha256sum)
    have=$(cat /tmp/cstrie-ft/site/cstrie-*.dist-info/RECORD 2>/dev/null | sha256sum)
    if [[ "$want" != "$have" && -e /tmp/cstrie-ft ]]; then
        echo "/tmp/cstrie-ft holds another bundle's cstrie: removing it (ft-run unpacks this one)"
        rm -rf /tmp/cstrie-ft
    fi
    bash .device/ft-run python -P - <<'PY'
import sys, sysconfig
import cstrie, cstrie.trie
try:
    import cstrie_lab.pytrie  # noqa: F401  (the harness's baselines)
except ImportError:
    sys.exit("the bundle has no cstrie_lab: run ../shared/device/ft-bundle atomics ./stress/lab")
t = cstrie.Trie()
t.subscribe("a.*", 1)
assert t.lookup("a.b") == [1]
try:
    import atomics  # noqa: F401  (the harness's clock)
    clock = "atomics"
except ImportError:
    clock = "perf_counter_ns (atomics not bundled)"
try:
    import matplotlib  # noqa: F401
    mpl = True
except ImportError:
    mpl = False
print(f"python {sys.version.split()[0]}, free-threaded build "
      f"{bool(sysconfig.get_config_var('Py_GIL_DISABLED'))}, GIL enabled {sys._is_gil_enabled()}")
print(f"cstrie from {cstrie.__file__}; harness clock: {clock}; matplotlib: {mpl}")
sys.exit(1 if sys._is_gil_enabled() else 0)
PY
}
export -f check_bundle
step bundle 120 bash -c check_bundle
have_py=$?

# -- engine (C) -----------------------------------------------------------------------
if step build 180 make -C stress scale CC=gcc; then
    step engine "$(limit_for 14 "$NCOUNTS" "$S" 0.1 30)" \
        stress/bin/scale_engine --threads "$THREADS" --seconds "$S" --repeat "$R" \
        --json "$OUT/engine.jsonl"
    # the baseline of the top levels' padded I-nodes (native/nodes.h): none padded
    step engine-unpadded "$(limit_for 3 2 "$S" 0.1 20)" \
        stress/bin/scale_engine-unpadded --threads "1,$NMAX" --seconds "$S" --repeat "$R" \
        --rows update-own-trie,update-disjoint,update-same
fi

# -- Python ---------------------------------------------------------------------------
if ((have_py == 0)); then
    step python "$(limit_for 15 "$NCOUNTS" "$S" 0.3 30)" \
        "${FT[@]}" python -P -m stress.lab.scaling --threads "$THREADS" --seconds "$S" \
        --repeat "$R" --json "$OUT/python.jsonl"
    for mix in 90/10 50/50; do
        # 3 implementations x 2 thread counts; generating the op sequences takes seconds
        step "harness-${mix/\//-}" "$(limit_for 3 2 "$MIX_DURATION" 2 60)" \
            "${FT[@]}" python -P -m stress.harness --thread-counts "1,$NMAX" --mix "$mix" \
            --duration "$MIX_DURATION" --repeat "$R" --baselines --no-check --keys 1024 \
            --seed 1 --no-progress --json "$OUT/harness-${mix/\//-}.json"
    done
    step linearizability 240 \
        "${FT[@]}" python -P -m stress.harness --thread-counts "$NMAX" --ops "$HARNESS_OPS" \
        --mix 80/20 --snapshot-every 2000 --keys 1024 --seed 1 --check --no-measure \
        --no-progress --timeout 200 --json "$OUT/linearizability.json"
    step probes "$(limit_for 14 4 "$S" 0.2 30)" \
        "${FT[@]}" python -P -m stress.harness.probes --threads "$NMAX" --seconds "$S" --repeat 2
fi

# -- summary --------------------------------------------------------------------------
{
    echo "== summary: $NCPU CPUs, threads $THREADS, ${S}s per run, best of $R, $((SECONDS - START))s =="
    grep -m1 'model name' "$OUT/machine.txt" || true
    grep -E '^(python|WARNING)' "$OUT/bundle.txt" "$OUT/machine.txt" 2>/dev/null | cut -d: -f2-
    jsons=()
    for f in engine python; do [[ -s "$OUT/$f.jsonl" ]] && jsons+=("$OUT/$f.jsonl"); done
    hjs=()
    for f in harness-90-10 harness-50-50; do [[ -s "$OUT/$f.json" ]] && hjs+=("$OUT/$f.json"); done
    if ((${#jsons[@]})); then
        # any Python >= 3.10 reads the JSON; the bundled one if the machine has none
        PYS=(python3)
        command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
            PYS=("${FT[@]}" python -P)
        # the plot where that Python has matplotlib (the bundle has not, by default)
        PLOT_ARGS=()
        "${PYS[@]}" -c 'import matplotlib' 2>/dev/null && PLOT_ARGS=(--plot "$OUT/scaling.png")
        harness_args=()
        ((${#hjs[@]})) && harness_args=(--harness-json "${hjs[@]}")
        "${PYS[@]}" -m stress.lab.scaling --from-json "${jsons[@]}" "${harness_args[@]}" \
            --summary-only "${PLOT_ARGS[@]}"
        "${PYS[@]}" -m stress.lab.scaling --from-json "${jsons[@]}" --markdown >"$OUT/tables.md"
    fi
    if [[ -f "$OUT/linearizability.txt" ]]; then
        echo "linearizability at $NMAX threads:"
        grep -E 'recorded |checked |violation|^(PASSED|FAILED)' "$OUT/linearizability.txt" | sed 's/^ */  /'
    fi
    if [[ -f "$OUT/engine-unpadded.txt" ]]; then
        echo "update rows with the top I-nodes unpadded (CST_PAD_LEVELS=0):"
        grep -E '^update' "$OUT/engine-unpadded.txt" | sed 's/^/  /'
    fi
    if [[ -f "$OUT/probes.txt" ]]; then
        echo "probes, 1 vs $NMAX threads:"
        sed -n '2,$p' "$OUT/probes.txt" | cut -c1-86
    fi
    echo "steps (exit 124 = timed out):"
    column -t -s $'\t' "$STEPS" 2>/dev/null || cat "$STEPS"
} >"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
echo "device_scaling: done in $((SECONDS - START)) s; files in $OUT"
exit "$failed"
