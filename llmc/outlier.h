// Deciding whether an optimizer step is applied: non-finite values and z-score outliers (llm.c's -sl / -sg).
//
// OutlierDetector keeps the last `window` finite values of one series (the train loss, or the grad norm) and scores
// a new value x by z = (x - mean) / std over that window (population std). Until the window is full the score is
// NaN (no decision). Every finite value enters the window, skipped ones included, as in llm.c: a genuine shift of
// level (a new data shard, a schedule change) is absorbed after a while instead of being skipped forever.
//
// The mean and std are recomputed from the stored values at each score (window = 128: negligible), never kept as
// running sums: a running sum depends on the whole history of additions and subtractions, so a detector restored
// from a checkpoint would round differently from one that never stopped. With the window as the only state, a
// resumed run makes bit-identical decisions (the state travels in the checkpoint's metadata, floats as JSON
// numbers, which nlohmann/json prints with round-trip precision).
//
// StepGuard applies the rules to one step (loss and norm are the all-reduced values, identical on every rank, so
// every rank decides the same):
//   - loss or grad norm non-finite: skip (the gradients are dropped, AdamW is not applied); after `max_bad` such
//     steps in a row the run stops with an error (something is broken: the lr, the data, the numerics);
//   - loss z-score > loss_z (-sl, 0 = off) or grad-norm z-score > norm_z (-sg, 0 = off): skip.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "error.h"

namespace llmc {

class OutlierDetector {
public:
    explicit OutlierDetector(size_t window = 128) : window_(window) {
        if (window < 2) fail("outlier window %zu: must be >= 2", window);
    }

    // The z-score of x against the window (NaN while the window is not yet full or has zero spread).
    double score(double x) const {
        if (values_.size() < window_) return NAN;
        double mean = 0;
        for (double v : values_) mean += v;
        mean /= (double)values_.size();
        double var = 0;
        for (double v : values_) var += (v - mean) * (v - mean);
        var /= (double)values_.size();
        return var > 0 ? (x - mean) / std::sqrt(var) : NAN;
    }
    // Adds a finite value (non-finite ones are ignored), replacing the oldest once the window is full.
    void add(double x) {
        if (!std::isfinite(x)) return;
        if (values_.size() < window_) values_.push_back(x);
        else values_[next_] = x;
        next_ = (next_ + 1) % window_;
    }

    nlohmann::json state() const { return {{"window", window_}, {"next", next_}, {"values", values_}}; }
    // Fails (llmc::Error) on a state that this detector could not have written: another window, a ring position
    // that does not fit the number of values, a value that is not a finite number.
    void set_state(const nlohmann::json& j) {
        if (!j.is_object() || !j.contains("window") || !j.contains("next") || !j.contains("values") ||
            !j["window"].is_number_unsigned() || !j["next"].is_number_unsigned() || !j["values"].is_array())
            fail("outlier detector state: expected {\"window\": n, \"next\": i, \"values\": [...]}");
        const size_t w = j["window"].get<size_t>(), next = j["next"].get<size_t>();
        std::vector<double> values;
        for (const nlohmann::json& v : j["values"]) {
            if (!v.is_number() || !std::isfinite(v.get<double>()))
                fail("outlier detector state: value %s is not a finite number", v.dump().c_str());
            values.push_back(v.get<double>());
        }
        const bool ring_ok = values.size() < w ? next == values.size() : next < w;
        if (w != window_ || values.size() > w || !ring_ok)
            fail("outlier detector state (window %zu, %zu values, next %zu) does not fit a window of %zu", w,
                 values.size(), next, window_);
        values_ = values, next_ = next;
    }

private:
    size_t window_;
    size_t next_ = 0;             // where the next value goes once the window is full
    std::vector<double> values_;  // at most window_ values (a ring once full)
};

struct StepVerdict {
    bool skip = false;
    std::string reason;           // "" or "non-finite", "loss outlier", "grad-norm outlier"
    double loss_z = NAN, norm_z = NAN;
};

class StepGuard {
public:
    StepGuard(float loss_z, float norm_z, int max_bad, size_t window = 128)
        : loss_z_(loss_z), norm_z_(norm_z), max_bad_(max_bad), loss_(window), norm_(window) {
        if (max_bad < 1) fail("--max-bad-steps %d: must be >= 1", max_bad);
    }

    // Judges step `step` (1-based, for messages) and updates the state; throws llmc::Error after max_bad
    // non-finite steps in a row.
    StepVerdict judge(int step, float loss, float norm) {
        StepVerdict v;
        if (!std::isfinite(loss) || !std::isfinite(norm)) {
            v.skip = true, v.reason = "non-finite";
            if (++bad_in_a_row_ >= max_bad_)
                fail("step %d: %d steps in a row had a non-finite loss or gradient norm (last: loss %g, norm %g); "
                     "stopping (lower -l, check the data, or resume from an earlier checkpoint; --max-bad-steps "
                     "sets the limit)",
                     step, bad_in_a_row_, loss, norm);
            return v;
        }
        bad_in_a_row_ = 0;
        v.loss_z = loss_.score(loss);
        v.norm_z = norm_.score(norm);
        loss_.add(loss);
        norm_.add(norm);
        if (loss_z_ > 0 && v.loss_z > loss_z_) v.skip = true, v.reason = "loss outlier";
        else if (norm_z_ > 0 && v.norm_z > norm_z_) v.skip = true, v.reason = "grad-norm outlier";
        return v;
    }
    int bad_in_a_row() const { return bad_in_a_row_; }

    nlohmann::json state() const {
        return {{"loss", loss_.state()}, {"grad_norm", norm_.state()}, {"bad_in_a_row", bad_in_a_row_}};
    }
    // Fails (llmc::Error) on anything malformed; a bad-step count at or above --max-bad-steps is kept (the limit
    // may have been lowered on resume: the next non-finite step then stops the run).
    void set_state(const nlohmann::json& j) {
        if (!j.is_object() || !j.contains("loss") || !j.contains("grad_norm") || !j.contains("bad_in_a_row"))
            fail("step guard state: expected {\"loss\": ..., \"grad_norm\": ..., \"bad_in_a_row\": n}");
        const nlohmann::json& bad = j["bad_in_a_row"];
        if (!bad.is_number_unsigned() || bad.get<uint64_t>() > (uint64_t)INT32_MAX)
            fail("step guard state: bad_in_a_row is %s, expected a count >= 0", bad.dump().c_str());
        loss_.set_state(j["loss"]);
        norm_.set_state(j["grad_norm"]);
        bad_in_a_row_ = bad.get<int>();
    }

private:
    float loss_z_, norm_z_;
    int max_bad_;
    int bad_in_a_row_ = 0;
    OutlierDetector loss_, norm_;
};

}  // namespace llmc
