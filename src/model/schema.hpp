// The vocabulary in which each telemetry record declares its fields once (the
// declarations are at the end of model/telemetry.hpp, beside the structs).
// Every layer that moves records derives its part from those lists: the value
// checks (model/record_checks), the wire codec (transport/record_codec), the
// telemetry JSONL writer and reader, the run database's columns, binds and
// reads, and the tests' comparator. Adding a field is one line there; the
// order of a list fixes the wire and file layouts.
//
// A list is a std::tuple of Field, one per member, visited at compile time
// (for_each_field), so a derived encoder is as fast as a hand-written one.
// std only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace traceml::model::schema {

/// What values a field may hold; the one rule every reader applies.
enum class Rule : std::uint8_t {
  Amount,    ///< a duration, byte count, percent or timestamp: finite and >= 0
  Reading,   ///< a measurement that may be below zero (a temperature): finite
  Index,     ///< a rank, index, device, pid or count: an integer >= 0
  Positive,  ///< a step id, size or core count: an integer >= 1
  Text,      ///< UTF-8 text of at most kMaxTextBytes (cut, never refused)
  Record,    ///< a nested record, or a list of them, checked by its own fields
};

/// How a telemetry JSONL file shows an absent optional value.
enum class Absent : std::uint8_t {
  Omitted,  ///< the key is left out
  Null,     ///< the key is written with null (GPU readings: "not measured")
};

/// One member of a record: its name (JSONL key, run-database column, the name
/// in messages), the member, its rule and unit, and what a layer needs to
/// know beyond those. Built with field() and the with_* modifiers.
template <class R, class M>
struct Field {
  using Record = R;
  using Member = M;

  const char* name;
  M R::*member;
  Rule rule;
  const char* unit;
  /// The run-database column, when it is not `name` ("gpu_index": INDEX is
  /// an SQL keyword); for a nested record, the prefix of its columns.
  const char* column = nullptr;
  Absent absent = Absent::Omitted;
  /// A field of the same record this one must not exceed (pageable copies
  /// are some of the copies), and its name for messages.
  M R::*at_most = nullptr;
  const char* at_most_name = nullptr;
  /// A value the model always has but a file may leave out, keeping what the
  /// reader set before (a GPU's index defaults to its list position).
  bool file_may_omit = false;
  /// Run-database columns that files written before the field existed lack;
  /// their reader reads the field as absent.
  bool added_later = false;
  /// A nested optional record: whether the run database keeps a has_<name>
  /// column saying it is present (without one, its first column is NULL
  /// when it is absent).
  bool presence_column = true;

  [[nodiscard]] constexpr const char* column_name() const {
    return column != nullptr ? column : name;
  }
  [[nodiscard]] constexpr Field with_column(const char* c) const {
    Field f = *this;
    f.column = c;
    return f;
  }
  [[nodiscard]] constexpr Field null_when_absent() const {
    Field f = *this;
    f.absent = Absent::Null;
    return f;
  }
  [[nodiscard]] constexpr Field not_above(M R::*other, const char* other_name) const {
    Field f = *this;
    f.at_most = other;
    f.at_most_name = other_name;
    return f;
  }
  [[nodiscard]] constexpr Field omissible_in_file() const {
    Field f = *this;
    f.file_may_omit = true;
    return f;
  }
  [[nodiscard]] constexpr Field since_later_schema() const {
    Field f = *this;
    f.added_later = true;
    return f;
  }
  [[nodiscard]] constexpr Field without_presence_column() const {
    Field f = *this;
    f.presence_column = false;
    return f;
  }
};

template <class R, class M>
constexpr Field<R, M> field(const char* name, M R::*member, Rule rule, const char* unit = "") {
  return Field<R, M>{name, member, rule, unit};
}

/// Specialised for every record type with `static constexpr auto fields`
/// (a tuple of Field) and `example` (a short JSON object for messages).
template <class R>
struct Schema;

template <class R, class = void>
struct has_schema : std::false_type {};
template <class R>
struct has_schema<R, std::void_t<decltype(Schema<R>::fields)>> : std::true_type {};
template <class R>
inline constexpr bool has_schema_v = has_schema<R>::value;

template <class T>
struct optional_of {
  static constexpr bool value = false;
  using type = T;
};
template <class T>
struct optional_of<std::optional<T>> {
  static constexpr bool value = true;
  using type = T;
};
/// True for std::optional<T>.
template <class T>
inline constexpr bool is_optional_v = optional_of<T>::value;
/// T for std::optional<T>, else T itself.
template <class T>
using value_type_t = typename optional_of<T>::type;

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};
template <class T>
inline constexpr bool is_vector_v = is_vector<T>::value;

/// Calls f(field) for every field of R, in list order.
template <class R, class F>
constexpr void for_each_field(F&& f) {
  std::apply([&f](const auto&... x) { (f(x), ...); }, Schema<R>::fields);
}

/// True for a field that holds a nested record, an optional one or a list.
template <class M>
inline constexpr bool is_nested_v = is_vector_v<M> || has_schema_v<value_type_t<M>>;

/// Calls f(field) for the fields of R that hold one value (a number or text),
/// in list order: the first part of every layout.
template <class R, class F>
constexpr void for_each_value_field(F&& f) {
  for_each_field<R>([&f](const auto& x) {
    using M = typename std::decay_t<decltype(x)>::Member;
    if constexpr (!is_nested_v<M>) f(x);
  });
}

/// Calls f(field) for the fields of R that hold nested records, in list order.
template <class R, class F>
constexpr void for_each_nested_field(F&& f) {
  for_each_field<R>([&f](const auto& x) {
    using M = typename std::decay_t<decltype(x)>::Member;
    if constexpr (is_nested_v<M>) f(x);
  });
}

/// How many optional members R has (each takes a presence bit on the wire).
template <class R>
constexpr unsigned optional_count() {
  unsigned n = 0;
  for_each_field<R>([&n](const auto& f) {
    using M = typename std::decay_t<decltype(f)>::Member;
    if (is_optional_v<M>) ++n;
  });
  return n;
}

}  // namespace traceml::model::schema
