// The message of a command-line error from cxxopts, naming the flag: cxxopts's own "Argument 'nan' failed to parse"
// names the value only, and "Option 'lr' does not exist" leaves the user to guess the flag that was meant.
#pragma once

#include <map>
#include <string>

#include <cxxopts.hpp>

namespace llmc {

// Other programs' names for a flag (nanoGPT's lr, max_iters, ...), written with underscores, and the flag here
// ("-l/--learning-rate"). An unknown option is looked up with its hyphens read as underscores.
using FlagHints = std::map<std::string, std::string>;

// One line for `e`, as thrown by parsing argv: "-l 'nan': not a valid value for this flag (see --help)", or
// "unknown option '--lr' (the learning rate here is -l/--learning-rate; see --help)".
std::string option_error_message(int argc, char** argv, const cxxopts::exceptions::exception& e,
                                 const FlagHints& hints = {});

}  // namespace llmc
