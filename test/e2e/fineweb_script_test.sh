#!/usr/bin/env bash
# dev/data/fineweb.sh end to end without the internet: a stand-in `datasets` module (first on PYTHONPATH) records
# what the script asks Hugging Face for and serves a few local documents; the script must ask for the right dataset
# and subset (fineweb-edu sample-10BT, fineweb sample-100BT), write llm.c's names into llm.c's folders, and split as
# llm.c does: the first shard of the document stream is val, the rest train numbered from 1. The shards' tokens must
# be those of prepare_data run directly on the same documents (the split itself: test/e2e/prepare_data_test.sh).
cd "$(dirname "$0")/../.."
source test/helpers/lib.sh
TMP=$(test_tmp_dir fineweb_script)
mkdir -p "$TMP/stub/datasets" "$TMP/docs"
if ! gpt2_vocab; then
    skip fineweb_script "no data/gpt2 tokenizer files, and dev/data/fetch_tokenizer.sh cannot fetch them"; finish
fi
[ -x ./prepare_data ] || { fail "fineweb_script" "./prepare_data not built"; finish; }
for i in $(seq 1 12); do
    printf 'Document %d says something about topic %d, at some length so that shards fill. %s\n' "$i" "$((i * 7))" \
        "$(printf 'word%d ' $(seq $i $((i + 15))))" >"$TMP/docs/doc$(printf %02d "$i").txt"
done
cat >"$TMP/stub/datasets/__init__.py" <<'PY'
# Stand-in for Hugging Face's `datasets` (tests only): records the request, yields the documents of $FAKE_DOCS.
import json, os
def load_dataset(path, name=None, split=None, streaming=False):
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(json.dumps({"path": path, "name": name, "split": split, "streaming": streaming}) + "\n")
    d = os.environ["FAKE_DOCS"]
    for fn in sorted(os.listdir(d)):
        yield {"text": open(os.path.join(d, fn), encoding="utf-8").read(), "id": fn}
PY
export PYTHONPATH="$TMP/stub" FAKE_DOCS="$TMP/docs" FAKE_LOG="$TMP/requests.jsonl"
run_script() {  # run_script NAME ARGS...
    local name=$1; shift
    DATA_ROOT="$TMP/data" SHARD_SIZE=60 bash dev/data/fineweb.sh "$@" -q >"$TMP/$name.log" 2>&1 \
        && pass "dev/data/fineweb.sh $* runs" || fail "dev/data/fineweb.sh $*" "$(tail -3 "$TMP/$name.log")"
}
run_script edu edu 10B
run_script classic classic 100B
/usr/bin/python3 - "$TMP/requests.jsonl" <<'PY' && pass "asks for HuggingFaceFW/fineweb-edu sample-10BT and HuggingFaceFW/fineweb sample-100BT, split train, streamed" || fail "dataset requests" "$(cat "$TMP/requests.jsonl")"
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
want = [{"path": "HuggingFaceFW/fineweb-edu", "name": "sample-10BT", "split": "train", "streaming": True},
        {"path": "HuggingFaceFW/fineweb", "name": "sample-100BT", "split": "train", "streaming": True}]
sys.exit(got != want)
PY
names() { (cd "$1" && ls *.bin | tr '\n' ' '); }
n=$(names "$TMP/data/edu_fineweb10B")
[[ "$n" == "edu_fineweb_train_000001.bin edu_fineweb_train_000002.bin "* && "$n" == *"edu_fineweb_val_000000.bin " && "$n" != *train_000000* ]] \
    && pass "edu 10B: data/edu_fineweb10B/edu_fineweb_val_000000.bin, edu_fineweb_train_000001.bin, ..." \
    || fail "edu 10B file names" "$n"
n=$(names "$TMP/data/fineweb100B")
[[ "$n" == "fineweb_train_000001.bin "* && "$n" == *"fineweb_val_000000.bin " ]] \
    && pass "classic 100B: data/fineweb100B/fineweb_val_000000.bin, fineweb_train_000001.bin, ..." \
    || fail "classic 100B file names" "$n"
# The same tokens as prepare_data on the documents directly, and the val shard is exactly the first 60 of them.
./prepare_data -q -o "$TMP/direct/edu_fineweb10B" --name edu_fineweb --shard-size 60 --val-first-shard "$TMP/docs" >/dev/null 2>&1
check "the shards are prepare_data --val-first-shard's on the same documents" \
    diff -r -x jsonl "$TMP/direct/edu_fineweb10B" "$TMP/data/edu_fineweb10B"
check "the val shard is one full shard (60 tokens)" \
    test "$(stat -c %s "$TMP/data/edu_fineweb10B/edu_fineweb_val_000000.bin")" -eq $((1024 + 2 * 60))
expect_error "a bad size is refused" "size must be 10B or 100B" bash dev/data/fineweb.sh edu 7B
finish
