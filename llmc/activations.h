// Activation tables. An architecture lists its device buffers once, in one function over its struct of buffer
// pointers that calls, for each member,
//   visit(member, BufferSize{name, shape, elements, bytes per element}, layer_stride)
// where layer_stride is the number of elements from one layer's slice to the next (0 for a buffer that is not per
// layer, or that every layer shares). From that one list come the allocation, the dry run's plan (llmc/memory_plan.h)
// and the per-layer views, so the three cannot drift apart. `table(buffers, visit)` calls the architecture's list.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "backend.h"

namespace llmc {

// Arch's table at one shape: its static buffer_table(Buffers&, const Shape&, visit) with the shape bound.
template <class Arch, class Shape>
auto activation_table(const Shape& s) {
    return [s](typename Arch::Buffers& b, auto&& visit) { Arch::buffer_table(b, s, visit); };
}

// The buffers a table lists, without allocating anything.
template <class Buffers, class Table>
std::vector<BufferSize> plan_buffers(Table&& table) {
    Buffers b{};
    std::vector<BufferSize> plan;
    table(b, [&](auto*&, const BufferSize& size, size_t) { plan.push_back(size); });
    return plan;
}

// Allocates every buffer of the table in its order into `b` (each also appended to `owned`); returns the bytes.
template <class Backend, class Buffers, class Table>
size_t allocate_buffers(Backend& be, Buffers& b, Table&& table, std::vector<void*>& owned) {
    size_t bytes = 0;
    table(b, [&](auto*& member, const BufferSize& size, size_t) {
        void* p = be.alloc(size.bytes());
        owned.push_back(p);
        bytes += size.bytes();
        member = static_cast<std::remove_reference_t<decltype(member)>>(p);
    });
    return bytes;
}

// Layer l's view of the buffers: every per-layer member moved to that layer's slice.
template <class Buffers, class Table>
Buffers layer_view(Buffers b, size_t l, Table&& table) {
    table(b, [&](auto*& member, const BufferSize&, size_t layer_stride) { member += l * layer_stride; });
    return b;
}

}  // namespace llmc
