// The cos / sin table of rotary position embeddings (host code; both backends read the same fp32 values).
//
// Head dimension hs (even), position t: the pair (i, i + hs/2) of a head's channels, i < hs/2, turns by the angle
// t theta_i with theta_i = base^(-2i / hs) (the first half of a head against its second half, as in the speedrun's
// records, not interleaved pairs). Row t of the table holds hs floats:
//   table[t hs + i]          = cos(t theta_i)
//   table[t hs + hs/2 + i]   = sin(t theta_i)          i < hs/2
// The angles and their cos / sin are computed in double and rounded once to fp32.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "error.h"
#include "speedrun_recipe.h"

namespace llmc {

inline size_t rotary_table_floats(size_t T, size_t hs) { return T * hs; }

inline void rotary_table(float* table, size_t T, size_t hs, double base = kRotaryBase) {
    if (hs == 0 || hs % 2 != 0) fail("rotary_table: head size %zu must be even and positive", hs);
    const size_t half = hs / 2;
    for (size_t i = 0; i < half; i++) {
        const double theta = std::pow(base, -2.0 * (double)i / (double)hs);
        for (size_t t = 0; t < T; t++) {
            const double angle = (double)t * theta;
            table[t * hs + i] = (float)std::cos(angle);
            table[t * hs + half + i] = (float)std::sin(angle);
        }
    }
}

inline std::vector<float> rotary_table(size_t T, size_t hs, double base = kRotaryBase) {
    std::vector<float> table(rotary_table_floats(T, hs));
    rotary_table(table.data(), T, hs, base);
    return table;
}

}  // namespace llmc
