#include "architectures.h"

#include "error.h"
#include "gpt2_params.h"
#include "speedrun_params.h"

namespace llmc {

namespace {
const Architecture* const kArchitectures[] = {&gpt2_architecture, &speedrun_architecture};
}  // namespace

const Architecture& architecture(const std::string& name) {
    std::string known;
    for (const Architecture* a : kArchitectures) {
        if (name == a->name) return *a;
        known += (known.empty() ? "" : ", ") + std::string(a->name);
    }
    fail("unknown architecture '%s' (known: %s)", name.c_str(), known.c_str());
}

}  // namespace llmc
