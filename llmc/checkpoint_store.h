// The checkpoint store: where a run's checkpoints live in its output directory, which of them are complete and
// usable for a resume, and which are kept (retention). The files inside a checkpoint are the format's
// (checkpoint_format.h).
//
// <output dir>/ckpt_<step, 8 digits>/ holds one checkpoint. A directory is complete iff its meta.json exists
// (meta.json is written last); meta.json is removed first when a checkpoint directory is rewritten or deleted, so
// a crash at any point leaves either the old complete checkpoint, or an incomplete one that resume ignores. Every
// directory entry made here is fsync'ed, so it survives a crash.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "checkpoint_format.h"

namespace llmc {

// <out>/ckpt_00000123
std::string checkpoint_dir(const std::string& out_dir, int step);
// Steps of the directories named ckpt_<digits> in out_dir, ascending (complete or not); empty if none / no dir.
std::vector<int> list_checkpoint_steps(const std::string& out_dir);
bool checkpoint_complete(const std::string& dir);  // meta.json exists
// mkdir (and its parents) + fsync of the parent, so the directory entry survives a crash.
void make_checkpoint_directory(const std::string& dir);
void remove_checkpoint(const std::string& dir);  // meta.json first, so a half-removed one is never complete

// Deletes checkpoints: keeps the newest `keep_last` complete ones (0: all), plus every one whose step is a multiple
// of keep_every (0: none), among those up to `newest`; incomplete directories older than `newest` (crash leftovers)
// go too. Checkpoints past `newest` (left by a run that got further before it crashed) are left alone.
void apply_retention(const std::string& out_dir, int keep_last, int keep_every, int newest);

// One candidate for -y 1 as this rank sees it: "" or the problem (naming the file and the field), and whether the
// problem is one every rank sees (only rank 0 reports it then). `check(meta)` is the run's own validation of a
// metadata file that read correctly; it may throw ResumeMismatch, which is passed on. This rank verifies the
// checkpoint's files rank, rank + world, ...
std::string checkpoint_problem(const std::string& dir, int step, int rank, int world,
                               const std::function<std::string(const CheckpointMeta&)>& check, CheckpointMeta* meta,
                               bool* shared);

}  // namespace llmc
