// Learning-rate schedules: linear warmup, then cosine, linear, constant or warmup-stable-decay (WSD).
//
// Steps are 0-based optimizer steps s in [0, total). With warmup W, peak lr P and final fraction f (-q):
//   warmup (all schedules):  lr(s) = P * (s + 1) / W                       for s < W
//   cosine:    lr = min + (P - min) * 0.5 * (1 + cos(pi * p)),   p = (s - W) / (total - W),  min = f * P
//   linear:    lr = P + (min - P) * p
//   constant:  lr = P
//   wsd:       lr = P until the last `decay_fraction` of the steps after warmup, then linear down to min
#pragma once

#include <string>

namespace llmc {

enum class LRSchedule { Cosine, Linear, Constant, WSD };

struct ScheduleConfig {
    LRSchedule kind = LRSchedule::Cosine;
    float peak_lr = 3e-4f;
    int warmup_steps = 0;
    int total_steps = 1;
    float final_fraction = 1.0f;  // -q: the final lr as a fraction of the peak
    float decay_fraction = 0.2f;  // WSD: share of the post-warmup steps spent decaying
};

// "cosine", "linear", "constant", "wsd"; fails naming the value otherwise.
LRSchedule parse_schedule(const std::string& name);
const char* schedule_name(LRSchedule s);
// Throws on impossible settings (negative lr or warmup, fraction outside [0, 1], total < 1).
void validate_schedule(const ScheduleConfig& c);
float learning_rate(const ScheduleConfig& c, int step);
// One line for the start-up banner: the schedule's shape as the values it takes, e.g.
//   "cosine, peak 0.002: lr 0.0001 at step 1, 0.002 at step 20 (end of warmup), 0.000200031 at step 400 (-q 0.1:
//    towards 0.1 x peak)"
// A decaying schedule that cannot decay (-q 1) says so.
std::string describe_schedule(const ScheduleConfig& c);

}  // namespace llmc
