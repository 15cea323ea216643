// Deterministic random numbers for initialisation, shuffling and sampling: the same seed gives the same values on
// every machine, compiler and rank (no std::normal_distribution, whose algorithm is implementation-defined).
//
// SplitMix64 (Steele, Lea, Flood 2014) as the generator; uniforms take the top 24 / 53 bits; normals by Box-Muller.
#pragma once

#include <cmath>
#include <cstdint>

namespace llmc {

inline uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

class Rng {
public:
    // `stream` separates independent sequences drawn from one seed (a tensor index, a rank, a purpose).
    explicit Rng(uint64_t seed, uint64_t stream = 0) : state_(seed) {
        uint64_t s = stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull;
        state_ ^= splitmix64(s);
    }
    uint64_t next_u64() { return splitmix64(state_); }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
    // Uniform integer in [0, n) (n > 0), without modulo bias.
    uint64_t below(uint64_t n) {
        uint64_t limit = UINT64_MAX - UINT64_MAX % n;
        uint64_t x;
        do x = next_u64(); while (x >= limit);
        return x % n;
    }
    uint64_t state() const { return state_; }
    void set_state(uint64_t s) { state_ = s; }

private:
    uint64_t state_;
};

// Standard normal floats by Box-Muller (both values of each pair are used).
class NormalRng {
public:
    NormalRng(uint64_t seed, uint64_t stream) : rng_(seed, stream) {}
    float next() {
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
        double u1 = rng_.uniform(), u2 = rng_.uniform();
        if (u1 < 1e-300) u1 = 1e-300;
        double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
        spare_ = (float)(r * std::sin(th));
        have_spare_ = true;
        return (float)(r * std::cos(th));
    }

private:
    Rng rng_;
    float spare_ = 0.0f;
    bool have_spare_ = false;
};

}  // namespace llmc
