// Learning-rate schedules against their formulas at hand-computed points.
#include <string>
#include <cmath>

#include "llmc/error.h"
#include "llmc/schedule.h"
#include "test/fixtures/testing.h"

using namespace llmc;

static bool near(float a, double b) { return std::fabs(a - b) <= 1e-6 * std::fabs(b) + 1e-12; }

int main() {
    ScheduleConfig c;
    c.peak_lr = 1e-3f, c.warmup_steps = 10, c.total_steps = 110, c.final_fraction = 0.1f;
    c.kind = LRSchedule::Cosine;
    testing::check("warmup first step", near(learning_rate(c, 0), 1e-4));
    testing::check("warmup last step reaches peak", near(learning_rate(c, 9), 1e-3));
    testing::check("cosine start", near(learning_rate(c, 10), 1e-3));
    testing::check("cosine midpoint", near(learning_rate(c, 60), 1e-4 + 0.9e-3 * 0.5));
    testing::check("cosine end at final fraction", near(learning_rate(c, 110), 1e-4));
    testing::check("cosine quarter", near(learning_rate(c, 35), 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(M_PI * 0.25))));
    c.kind = LRSchedule::Linear;
    testing::check("linear midpoint", near(learning_rate(c, 60), 0.55e-3));
    testing::check("linear end", near(learning_rate(c, 110), 1e-4));
    c.kind = LRSchedule::Constant;
    testing::check("constant", near(learning_rate(c, 100), 1e-3) && near(learning_rate(c, 3), 4e-4));
    c.kind = LRSchedule::WSD;
    c.decay_fraction = 0.2f;
    testing::check("wsd stable", near(learning_rate(c, 90), 1e-3));
    testing::check("wsd decay midpoint", near(learning_rate(c, 100), 0.55e-3));
    testing::check("wsd end", near(learning_rate(c, 110), 1e-4));
    c.warmup_steps = 0;
    c.kind = LRSchedule::Cosine;
    testing::check("no warmup starts at peak", near(learning_rate(c, 0), 1e-3));
    testing::check("parse names", parse_schedule("wsd") == LRSchedule::WSD && parse_schedule("linear") == LRSchedule::Linear);
    bool threw = false;
    try { parse_schedule("step"); } catch (const Error&) { threw = true; }
    testing::check("unknown schedule refused", threw);
    threw = false;
    c.final_fraction = 1.5f;
    try { validate_schedule(c); } catch (const Error&) { threw = true; }
    testing::check("final fraction > 1 refused", threw);
    // The start-up line: the values the schedule takes, and a decaying schedule that cannot decay called flat.
    ScheduleConfig d;
    d.kind = LRSchedule::Cosine, d.peak_lr = 2e-3f, d.warmup_steps = 20, d.total_steps = 400, d.final_fraction = 0.1f;
    const std::string line = describe_schedule(d);
    testing::check("describe_schedule: warmup, peak, last step", line ==
                   "cosine, peak 0.002: lr 0.0001 at step 1, 0.002 at step 20 (end of warmup), 0.000200031 at step 400 "
                   "(-q 0.1: towards 0.1 x peak)", "%s", line.c_str());
    d.final_fraction = 1.0f;
    testing::check("describe_schedule: -q 1 with cosine is flat", describe_schedule(d).find("flat") != std::string::npos);
    d.kind = LRSchedule::Constant;
    testing::check("describe_schedule: constant is not called flat", describe_schedule(d).find("flat") == std::string::npos);
    return testing::finish();
}
