// Host-side bfloat16 conversions (bit patterns in uint16_t), used for model files and MPI reductions.
// bf16 is the top 16 bits of an IEEE float: conversion rounds to nearest, ties to even; NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace llmc {

inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                             // round to nearest even
    return (uint16_t)(u >> 16);
}

}  // namespace llmc
