// Learning-rate schedules against their formulas at hand-computed points.
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
    return testing::finish();
}
