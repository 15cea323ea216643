// safetensors reader (see safetensors.h).
#include "safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "bf16.h"
#include "error.h"
#include "file_util.h"

namespace llmc {

size_t safetensors_dtype_size(const std::string& d) {
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
    return 0;
}

float fp16_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);  // inf / NaN
    } else if (exp != 0) {
        u = sign | ((exp + 112) << 23) | (man << 13);  // rebias 15 -> 127
    } else if (man == 0) {
        u = sign;
    } else {  // subnormal: man * 2^-24, exactly representable in fp32
        float f = (float)man * 0x1.0p-24f;
        std::memcpy(&u, &f, 4);
        u |= sign;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

namespace {

// A header number that must be a non-negative integer: 3.5, -1, "7" or [7] would otherwise be read as something
// else (get<size_t>() truncates and wraps).
size_t header_size(const std::string& path, const std::string& name, const char* field, const nlohmann::json& v) {
    if (!v.is_number_unsigned())
        fail("%s: tensor %s: %s holds %s, expected non-negative integers", path.c_str(), name.c_str(), field,
             v.is_number() ? v.dump().c_str() : v.type_name());
    return v.get<size_t>();
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
        fail("%s: tensor %s: header entry lacks dtype, shape or data_offsets", path.c_str(), name.c_str());
    SafetensorsEntry e;
    if (!j["dtype"].is_string()) fail("%s: tensor %s: dtype is of JSON type %s, expected a name", path.c_str(), name.c_str(),
                                      j["dtype"].type_name());
    e.dtype = j["dtype"].get<std::string>();
    const size_t elem = safetensors_dtype_size(e.dtype);
    if (elem == 0) fail("%s: tensor %s: unknown dtype %s", path.c_str(), name.c_str(), e.dtype.c_str());
    if (!j["shape"].is_array())
        fail("%s: tensor %s: shape is of JSON type %s, expected an array", path.c_str(), name.c_str(),
             j["shape"].type_name());
    size_t n = 1;
    for (const auto& d : j["shape"]) {
        e.shape.push_back(header_size(path, name, "shape", d));
        if (e.shape.back() != 0 && n > SIZE_MAX / elem / e.shape.back())
            fail("%s: tensor %s: its shape has more elements than any file can hold", path.c_str(), name.c_str());
        n *= e.shape.back();
    }
    const auto& off = j["data_offsets"];
    if (!off.is_array() || off.size() != 2) fail("%s: tensor %s: data_offsets is not [begin, end]", path.c_str(), name.c_str());
    e.begin = header_size(path, name, "data_offsets", off[0]), e.end = header_size(path, name, "data_offsets", off[1]);
    if (e.end < e.begin || e.end - e.begin != n * elem)
        fail("%s: tensor %s: data_offsets [%zu, %zu) hold %zu bytes, its shape and dtype %s need %zu", path.c_str(),
             name.c_str(), e.begin, e.end, e.end - e.begin, e.dtype.c_str(), n * elem);
    return e;
}

// The header's top-level keys, each once: JSON parsers keep the last of two equal keys, so a duplicated tensor
// name would silently replace the first one's bytes with other ones.
nlohmann::json parse_header(const std::string& path, const std::string& text) {
    std::set<std::string> keys;
    std::string duplicate;
    nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
        if (depth == 1 && event == nlohmann::json::parse_event_t::key && parsed.is_string() &&
            !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
            duplicate = parsed.get<std::string>();
        return true;
    };
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text, note_keys);
    } catch (const std::exception&) {
        fail("%s: the header is not valid JSON (not a safetensors file?)", path.c_str());
    }
    if (!header.is_object()) fail("%s: the header is not a JSON object", path.c_str());
    if (!duplicate.empty()) fail("%s: the header names tensor %s twice", path.c_str(), duplicate.c_str());
    return header;
}

// No two tensors share a byte: overlapping data_offsets would make one tensor's values another's.
void refuse_overlaps(const std::string& path, const std::map<std::string, SafetensorsEntry>& tensors) {
    std::vector<std::pair<size_t, const std::string*>> starts;  // non-empty tensors by their first byte
    for (const auto& [name, e] : tensors)
        if (e.end > e.begin) starts.push_back({e.begin, &name});
    std::sort(starts.begin(), starts.end());
    for (size_t i = 1; i < starts.size(); i++) {
        const SafetensorsEntry& prev = tensors.at(*starts[i - 1].second);
        if (starts[i].first < prev.end)
            fail("%s: tensors %s [%zu, %zu) and %s [%zu, %zu) overlap in the data section", path.c_str(),
                 starts[i - 1].second->c_str(), prev.begin, prev.end, starts[i].second->c_str(), starts[i].first,
                 tensors.at(*starts[i].second).end);
    }
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
    const size_t size = file_size_or_fail(path);
    if (size < 8) fail("%s: %zu bytes, too short for a safetensors file (truncated?)", path.c_str(), size);
    std::unique_ptr<FILE, int (*)(FILE*)> file(open_or_fail(path, "rb"), std::fclose);  // closed if refused
    uint64_t n = 0;
    read_exact(file.get(), &n, sizeof n, path);
    if (n > size - 8 || n > (uint64_t(1) << 30))
        fail("%s: header length %llu does not fit in the file's %zu bytes (truncated, or not a safetensors file)",
             path.c_str(), (unsigned long long)n, size);
    std::string text(n, '\0');
    read_exact(file.get(), text.data(), n, path);
    const nlohmann::json header = parse_header(path, text);
    data_start_ = 8 + n;
    const size_t data_bytes = size - data_start_;
    try {
        for (auto it = header.begin(); it != header.end(); ++it) {
            if (it.key() == "__metadata__") continue;
            SafetensorsEntry e = parse_entry(path, it.key(), it.value());
            if (e.end > data_bytes)
                fail("%s: tensor %s ends at data byte %zu but the file holds %zu data bytes (truncated?)", path.c_str(),
                     it.key().c_str(), e.end, data_bytes);
            tensors_[it.key()] = e;
        }
    } catch (const nlohmann::json::exception& ex) {
        fail("%s: malformed header entry (%s)", path.c_str(), ex.what());
    }
    refuse_overlaps(path, tensors_);
    file_ = file.release();
}

SafetensorsFile::~SafetensorsFile() {
    if (file_) std::fclose(file_);
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail("%s: missing tensor %s", path_.c_str(), name.c_str());
    return it->second;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
    const SafetensorsEntry& e = entry(name);
    const size_t elem = safetensors_dtype_size(e.dtype), n = (e.end - e.begin) / elem;
    if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16")
        fail("%s: tensor %s has dtype %s (expected F32, F16 or BF16)", path_.c_str(), name.c_str(), e.dtype.c_str());
    if (std::fseek(file_, (long)(data_start_ + e.begin), SEEK_SET) != 0)
        fail("%s: cannot seek to tensor %s", path_.c_str(), name.c_str());
    std::vector<float> out(n);
    if (e.dtype == "F32") {
        read_exact(file_, out.data(), n * 4, path_);
    } else {
        std::vector<uint16_t> raw(n);
        read_exact(file_, raw.data(), n * 2, path_);
        for (size_t i = 0; i < n; i++) out[i] = e.dtype == "BF16" ? bf16_to_float(raw[i]) : fp16_to_float(raw[i]);
    }
    return out;
}

}  // namespace llmc
