// The trainer's output directory (-o) is never destroyed (docs/checkpoints.md, "The output directory").
//
// A run writes metrics.jsonl, ckpt_<step>/ and the final model.bin into -o. A fresh run (no -y 1) into a directory
// that holds any of these from an earlier run is refused, naming them and the two ways out: resume the earlier
// run with -y 1, or choose another -o. With --start-over the earlier files are moved (renamed, never copied or
// truncated) into <-o>/previous_<UTC time>/ and the run starts afresh; -y 1 with no checkpoint to resume from does
// the same, with a note. Nothing else in -o is touched.
#pragma once

#include <string>
#include <vector>

namespace llmc {

// Names (relative to `dir`) of an earlier run's files in `dir`: metrics.jsonl, model.bin and every ckpt_<digits>
// directory, in that order; empty when there are none or `dir` does not exist.
std::vector<std::string> earlier_run_files(const std::string& dir);

// Moves `names` (from earlier_run_files) into a new folder dir/previous_<YYYYmmddTHHMMSSZ>[_<n>] and returns its
// path. Renames only (same filesystem, atomic per entry); fails naming the entry that could not be moved.
std::string move_earlier_run_aside(const std::string& dir, const std::vector<std::string>& names);

// "metrics.jsonl, model.bin and 3 checkpoints (ckpt_00000010 ... ckpt_00000030)": for messages.
std::string describe_earlier_run(const std::vector<std::string>& names);

}  // namespace llmc
