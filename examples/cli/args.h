// A small command-line parser for the gannet CLI: --flag value, --flag=value, -x value, boolean
// switches and positional arguments, with errors that say which flag and why.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gannet_cli {

struct FlagSpec {
  std::string name;       // "max-tokens"
  char short_name = 0;    // 'n'
  bool takes_value = true;
  bool repeatable = false;
  std::string value_name; // "N"
  std::string help;
};

class Args {
 public:
  // Returns false and sets error() on unknown flags or missing values.
  bool Parse(const std::vector<FlagSpec>& specs, int argc, char** argv, int first);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  const std::string& error() const { return error_; }

  // Typed getters; on a malformed value they set error() and return the default.
  int GetInt(const std::string& name, int def);
  double GetDouble(const std::string& name, double def);
  unsigned long long GetU64(const std::string& name, unsigned long long def);

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  std::string error_;
};

std::string FormatFlags(const std::vector<FlagSpec>& specs);

}  // namespace gannet_cli
