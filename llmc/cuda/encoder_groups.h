// The host side of the encoder's dwte gather (encoder.cuh): positions grouped by token and cut into chunks.
//
// encoder_group_positions is a stable counting sort of the positions 0..N-1 of a batch by token (buckets in order of
// first appearance, positions ascending inside a bucket), every bucket cut into chunks of at most kEncoderChunk
// positions. The result is one packed int array (uploaded to the device in one copy) read through EncoderGroups.
// Host-only code: included by encoder.cuh and by cuda_backend.h (which keeps the sizes of a prepared grouping).
#pragma once

#include <cstddef>

#include "../error.h"

namespace llmc {

constexpr size_t kEncoderChunk = 32;  // positions summed by one thread of the dwte gather

// The grouping of the positions by token, as views into one packed int array (see encoder_group_positions):
//   positions[N]               positions sorted by bucket, ascending inside a bucket
//   chunk_start[chunks + 1]    chunk k covers positions[chunk_start[k] .. chunk_start[k + 1])
//   chunk_token[chunks]        its token
//   chunk_slot[chunks]         -1: the token's only chunk (adds into dwte); else its scratch slot
//   multi_token[multi]         the tokens with several chunks
//   multi_slot_start[multi+1]  their slots: multi_slot_start[m] .. multi_slot_start[m + 1], in chunk order
struct EncoderGroups {
    const int *positions, *chunk_start, *chunk_token, *chunk_slot, *multi_token, *multi_slot_start;
    size_t num_chunks, num_multi, num_slots;
};
// Sizes of a grouping of N positions (what encoder_group_positions returns with the views still unset).
struct EncoderGroupSizes {
    size_t N = 0, num_chunks = 0, num_multi = 0, num_slots = 0;
    size_t ints() const { return N + (num_chunks + 1) + 2 * num_chunks + num_multi + (num_multi + 1); }
};
inline EncoderGroups encoder_group_views(const int* packed, const EncoderGroupSizes& s) {
    EncoderGroups g;
    g.positions = packed;
    g.chunk_start = g.positions + s.N;
    g.chunk_token = g.chunk_start + s.num_chunks + 1;
    g.chunk_slot = g.chunk_token + s.num_chunks;
    g.multi_token = g.chunk_slot + s.num_chunks;
    g.multi_slot_start = g.multi_token + s.num_multi;
    g.num_chunks = s.num_chunks, g.num_multi = s.num_multi, g.num_slots = s.num_slots;
    return g;
}
// Upper bounds for buffers sized once: ints of the packed grouping (every count is at most N) and scratch slots
// (a token with c > kEncoderChunk positions has ceil(c / kEncoderChunk) <= 2 c / kEncoderChunk chunks).
inline size_t encoder_max_group_ints(size_t N) { return 6 * N + 2; }
inline size_t encoder_max_slots(size_t N) { return 2 * N / kEncoderChunk + 1; }

// Host side of the grouping: a stable counting sort of positions 0..N-1 by token, buckets cut into chunks. Writes
// the packed arrays of EncoderGroups to `packed` (encoder_max_group_ints(N) ints) and returns their sizes. count
// and next are scratch arrays of vocab_size entries; count must be all zero on entry and is all zero on return.
inline EncoderGroupSizes encoder_group_positions(int* packed, const int* tokens, size_t N, int* count, int* next,
                                                 size_t vocab_size) {
    if (N >= 2147483647u) fail("encoder_backward: %zu positions do not fit the int indices of the grouping", N);
    for (size_t n = 0; n < N; n++) {
        const int tok = tokens[n];
        if (tok < 0 || (size_t)tok >= vocab_size)
            fail("encoder_backward: token %d at position %zu is outside [0, %zu)", tok, n, vocab_size);
        count[tok]++;
    }
    // Sizes, bucket by bucket in order of first appearance (a counted bucket's count is negated).
    EncoderGroupSizes s;
    s.N = N;
    for (size_t n = 0; n < N; n++) {
        const int tok = tokens[n];
        if (count[tok] <= 0) continue;
        const size_t chunks = ((size_t)count[tok] + kEncoderChunk - 1) / kEncoderChunk;
        s.num_chunks += chunks;
        if (chunks > 1) s.num_multi++, s.num_slots += chunks;
        count[tok] = -count[tok];
    }
    const EncoderGroups g = encoder_group_views(packed, s);
    int* positions = packed;
    int* chunk_start = const_cast<int*>(g.chunk_start);
    int* chunk_token = const_cast<int*>(g.chunk_token);
    int* chunk_slot = const_cast<int*>(g.chunk_slot);
    int* multi_token = const_cast<int*>(g.multi_token);
    int* multi_slot_start = const_cast<int*>(g.multi_slot_start);
    // Open each bucket at its token's first appearance (emitting its chunks), then place every position.
    size_t start = 0, chunk = 0, m = 0;
    int slot = 0;
    for (size_t n = 0; n < N; n++) {
        const int tok = tokens[n];
        if (count[tok] < 0) {
            const size_t c = (size_t)-count[tok], chunks = (c + kEncoderChunk - 1) / kEncoderChunk;
            count[tok] = 0;
            next[tok] = (int)start;
            if (chunks > 1) {
                multi_token[m] = tok;
                multi_slot_start[m] = slot;
                m++;
            }
            for (size_t q = 0; q < chunks; q++, chunk++) {
                chunk_start[chunk] = (int)(start + q * kEncoderChunk);
                chunk_token[chunk] = tok;
                chunk_slot[chunk] = chunks > 1 ? slot++ : -1;
            }
            start += c;
        }
        positions[next[tok]++] = (int)n;
    }
    chunk_start[s.num_chunks] = (int)N;
    multi_slot_start[s.num_multi] = slot;
    return s;
}

}  // namespace llmc
