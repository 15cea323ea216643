// Learning-rate schedules (see schedule.h for the formulas).
#include "schedule.h"

#include <algorithm>
#include <cmath>

#include "error.h"

namespace llmc {

LRSchedule parse_schedule(const std::string& name) {
    if (name == "cosine") return LRSchedule::Cosine;
    if (name == "linear") return LRSchedule::Linear;
    if (name == "constant") return LRSchedule::Constant;
    if (name == "wsd") return LRSchedule::WSD;
    fail("-k '%s': unknown learning-rate schedule (expected cosine, linear, constant or wsd)", name.c_str());
}

const char* schedule_name(LRSchedule s) {
    switch (s) {
        case LRSchedule::Cosine: return "cosine";
        case LRSchedule::Linear: return "linear";
        case LRSchedule::Constant: return "constant";
        case LRSchedule::WSD: return "wsd";
    }
    return "?";
}

void validate_schedule(const ScheduleConfig& c) {
    if (!(c.peak_lr >= 0.0f) || !std::isfinite(c.peak_lr)) fail("-l %g: the learning rate must be >= 0", c.peak_lr);
    if (c.warmup_steps < 0) fail("-u %d: warmup steps must be >= 0", c.warmup_steps);
    if (c.total_steps < 1) fail("total steps %d: must be >= 1", c.total_steps);
    if (!(c.final_fraction >= 0.0f && c.final_fraction <= 1.0f))
        fail("-q %g: the final learning-rate fraction must be in [0, 1]", c.final_fraction);
    if (!(c.decay_fraction > 0.0f && c.decay_fraction <= 1.0f))
        fail("WSD decay fraction %g: must be in (0, 1]", c.decay_fraction);
}

float learning_rate(const ScheduleConfig& c, int step) {
    const double peak = c.peak_lr, min_lr = c.final_fraction * peak;
    if (step < c.warmup_steps) return (float)(peak * (step + 1) / c.warmup_steps);
    const int decay_steps = c.total_steps - c.warmup_steps;
    // Progress through the post-warmup phase, in [0, 1].
    const double p = decay_steps <= 0 ? 1.0 : std::min(1.0, (double)(step - c.warmup_steps) / decay_steps);
    switch (c.kind) {
        case LRSchedule::Constant: return (float)peak;
        case LRSchedule::Linear: return (float)(peak + (min_lr - peak) * p);
        case LRSchedule::Cosine: return (float)(min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(M_PI * p)));
        case LRSchedule::WSD: {
            const double stable = 1.0 - c.decay_fraction;
            if (p <= stable) return (float)peak;
            return (float)(peak + (min_lr - peak) * (p - stable) / c.decay_fraction);
        }
    }
    return (float)peak;
}

std::string describe_schedule(const ScheduleConfig& c) {
    char buf[512];
    int n = std::snprintf(buf, sizeof buf, "%s, peak %g: lr %g at step 1", schedule_name(c.kind), c.peak_lr,
                          learning_rate(c, 0));
    auto add = [&](const char* fmt, auto... args) {
        if (n < (int)sizeof buf) n += std::snprintf(buf + n, sizeof buf - n, fmt, args...);
    };
    if (c.warmup_steps > 1 && c.warmup_steps < c.total_steps)
        add(", %g at step %d (end of warmup)", learning_rate(c, c.warmup_steps - 1), c.warmup_steps);
    if (c.total_steps > 1)
        add(", %g at step %d (-q %g: towards %g x peak)", learning_rate(c, c.total_steps - 1), c.total_steps,
            c.final_fraction, c.final_fraction);
    if (c.kind != LRSchedule::Constant && c.final_fraction >= 1.0f)
        add(" -- flat: -q 1 keeps the peak to the end (-q 0.1 decays to a tenth)");
    return buf;
}

}  // namespace llmc
