// The gannet CLI's argument parser. It never guesses: `--flag value`, `--flag=value` and `-x value`
// (one-letter flags, value as the next argument) are the only spellings, plus the few single-dash
// words llama.cpp users type that mean the same here (`-sys`, `-md`: FlagSpec::dash_words); an
// unknown flag, any other single-dash word (`-ngl`, `-n5`), a repeated flag, a value that is not
// a number in range, and any positional argument are errors that say what was wrong and what to
// write instead.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gannet_cli {

struct FlagSpec {
  std::string name;     // "max-tokens"
  char short_name = 0;  // 'n'
  bool takes_value = true;
  bool repeatable = false;
  std::string value_name;  // "N"
  std::string help;
  std::vector<std::string> aliases = {};     // other long spellings ("temp" for "temperature")
  std::vector<std::string> dash_words = {};  // single-dash spellings: "sys" for -sys
};

class Args {
 public:
  // Returns false and sets error() on anything the rules above reject.
  bool Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::string& error() const { return error_; }

  // Typed getters: the default when the flag is absent; on a malformed or out-of-range value they
  // set error() (naming the flag, the value and the range) and return the default.
  int64_t GetInt(const std::string& name, int64_t def, int64_t min, int64_t max);
  double GetDouble(const std::string& name, double def, double min, double max);
  uint64_t GetU64(const std::string& name, uint64_t def);
  // A byte count: digits with an optional K, M, G or T suffix (powers of 1024).
  int64_t GetBytes(const std::string& name, int64_t def);
  void SetError(std::string e) {
    if (error_.empty()) error_ = std::move(e);
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::string error_;
};

// Strict integer parsing: an optional '-' then digits only, within [min, max].
bool ParseInt64(const std::string& s, int64_t min, int64_t max, int64_t* out);

std::string FormatFlags(const std::vector<FlagSpec>& specs);

}  // namespace gannet_cli
