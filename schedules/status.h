// Error values for bad input, and an always-on check for broken invariants.
//
// Three tiers (see DESIGN.md): input a user can fix comes back as an `Error`
// inside a `Result<T>` with a message naming what to fix; a broken internal
// invariant is `PPSIM_CHECK`, which aborts with file and line; only `main`
// turns an error into an exit code.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ppsim {

struct Error {
  std::string message;
};

// Either a value or an Error. Deliberately small: no exceptions cross layers.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  // REQUIRES: ok()
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // REQUIRES: !ok()
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// A Result without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error.message)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return error_; }

 private:
  std::string error_;
  bool ok_ = true;
};

// User text as an error message may echo it: control bytes (a terminal
// would act on them) become \xNN; everything else is kept.
inline std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

[[noreturn]] inline void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "ppsim: internal error: check failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}

// A tool's main: what `body` returns, or, for an exception that escaped
// it, a one-line error and exit status 1 (never std::terminate).
template <typename Body>
int guarded_main(const char* tool, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory\n", tool);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, printable(e.what()).c_str());
  }
  return 1;
}

}  // namespace ppsim

// Always on, also in Release: a broken invariant must never turn into a wrong number.
#define PPSIM_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::ppsim::check_failed(#cond, __FILE__, __LINE__))
