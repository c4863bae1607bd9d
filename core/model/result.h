// One error type for all of gotap: library code returns Result<T>, never aborts or exits on
// bad input; main() maps an Error to one "gotap: ..." line and an exit code.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace gotap {

// What kind of failure, so the CLI can pick the documented exit code.
enum class ErrorKind {
  BadInput,  // bad usage or bad input: exit 2
  Runtime,   // the trace failed at run time: exit 1
};

struct Error {
  std::string message;
  int errnum = 0;
  ErrorKind kind = ErrorKind::BadInput;

  std::string what() const {
    if (errnum == 0) return message;
    return fmt::format("{}: {}", message, std::strerror(errnum));
  }
};

template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...), 0, ErrorKind::BadInput};
}

template <typename... Args>
Error runtime_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...), 0, ErrorKind::Runtime};
}

// An Error carrying errno, e.g. from a failed open().
template <typename... Args>
Error errno_error(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...), errno, kind};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace gotap

// Propagate an error from an expression returning Result<...>.
#define GOTAP_TRY(expr)                                  \
  do {                                                   \
    auto gotap_try_r_ = (expr);                          \
    if (!gotap_try_r_.ok()) return gotap_try_r_.error(); \
  } while (0)
