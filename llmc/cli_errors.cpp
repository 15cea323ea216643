// Command-line error messages (see cli_errors.h).
#include "cli_errors.h"

#include <cctype>

namespace llmc {

namespace {

// The text between cxxopts's quotes in one of its messages.
std::string quoted_in(const std::string& msg) {
    const size_t a = msg.find(cxxopts::LQUOTE);
    if (a == std::string::npos) return "";
    const size_t b = msg.find(cxxopts::RQUOTE, a + cxxopts::LQUOTE.size());
    return b == std::string::npos ? "" : msg.substr(a + cxxopts::LQUOTE.size(), b - a - cxxopts::LQUOTE.size());
}

// The flag whose value `text` is, as the user typed it ("-l" for `-l nan`, "--eps" for `--eps=inf`), or "" when it
// cannot be told.
std::string flag_of_value(int argc, char** argv, const std::string& text) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == text && i > 1 && argv[i - 1][0] == '-') return argv[i - 1];
        const size_t eq = a.find('=');
        if (a.size() > 2 && a.compare(0, 2, "--") == 0 && eq != std::string::npos && a.substr(eq + 1) == text)
            return a.substr(0, eq);
        if (a.size() > 2 && a[0] == '-' && a[1] != '-' && a.substr(2) == text) return a.substr(0, 2);
    }
    return "";
}

std::string unknown_option_message(const std::string& name, const FlagHints& hints) {
    std::string key;
    for (char c : name) key += c == '-' ? '_' : (char)std::tolower((unsigned char)c);
    const auto it = hints.find(key);
    const std::string shown = (name.size() == 1 ? "-" : "--") + name;
    if (it != hints.end()) return "unknown option '" + shown + "': here it is " + it->second + " (see --help)";
    if (name.find('_') != std::string::npos)
        return "unknown option '" + shown + "' (long flags here are written with hyphens; see --help)";
    return "unknown option '" + shown + "' (see --help)";
}

}  // namespace

std::string option_error_message(int argc, char** argv, const cxxopts::exceptions::exception& e,
                                 const FlagHints& hints) {
    const std::string quoted = quoted_in(e.what());
    if (dynamic_cast<const cxxopts::exceptions::incorrect_argument_type*>(&e)) {
        const std::string flag = flag_of_value(argc, argv, quoted);
        if (!flag.empty()) return flag + " '" + quoted + "': not a valid value for this flag (see --help)";
    }
    if (dynamic_cast<const cxxopts::exceptions::no_such_option*>(&e) && !quoted.empty())
        return unknown_option_message(quoted, hints);
    return std::string(e.what()) + " (see --help)";
}

}  // namespace llmc
