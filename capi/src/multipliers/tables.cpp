// Parsers for product-table files, over a byte buffer so they can be
// fuzzed: raw little-endian 16-bit binary (TFApprox), C source arrays
// (AdaPT) and text/CSV (ApproxTorch). The operand order is always given by
// the caller, never guessed; the result is a raw-bit-pattern table.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "../core/error.hpp"
#include "library.hpp"

namespace approxmul::library {
namespace {

struct Entries {
    std::vector<int64_t> values;
    int64_t lo = INT64_MIN, hi = INT64_MAX;  // the element type's range (C source)
    const char *type = nullptr;
};

// Where a parse error is: 1-based line of a byte offset.
int line_of(const unsigned char *data, size_t offset) {
    int line = 1;
    for (size_t i = 0; i < offset; ++i) line += data[i] == '\n';
    return line;
}

void require_text(const unsigned char *data, size_t size, const char *what) {
    for (size_t i = 0; i < size; ++i)
        if (data[i] == 0 || (data[i] < 32 && !std::isspace(data[i])))
            fail(APPROXMUL_ERR_FORMAT,
                 "byte 0x%02x at offset %zu (line %d) is not text: expected %s; a binary "
                 "table is format 'binary'",
                 data[i], i, line_of(data, i), what);
}

Entries parse_binary(const unsigned char *data, size_t size, bool is_signed) {
    if (size % 2 != 0)
        fail(APPROXMUL_ERR_FORMAT,
             "%zu bytes is not a whole number of 16-bit entries (truncated file?); a binary "
             "table of n-bit operands has 2 * 4^n bytes (131072 for 8 bits)",
             size);
    Entries e;
    e.values.resize(size / 2);
    for (size_t i = 0; i < e.values.size(); ++i) {
        const uint16_t raw = uint16_t(data[2 * i] | data[2 * i + 1] << 8);
        e.values[i] = is_signed ? int64_t(int16_t(raw)) : int64_t(raw);
    }
    return e;
}

// One integer literal at p (C syntax: sign, 0x hex, octal, u/l suffixes).
bool read_integer(const char *&p, int64_t &value, bool c_syntax) {
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(p, &end, c_syntax ? 0 : 10);
    if (end == p || errno == ERANGE) return false;
    p = end;
    if (c_syntax)
        while (*p == 'u' || *p == 'U' || *p == 'l' || *p == 'L') ++p;
    value = v;
    return !std::isalnum(static_cast<unsigned char>(*p)) && *p != '.' && *p != '_';
}

// The literal starting at p, up to the next separator, for error messages.
std::string token_at(const char *p) {
    const char *end = p;
    while (*end && !std::isspace(static_cast<unsigned char>(*end)) && *end != ',' &&
           *end != ';' && *end != '}' && *end != '{' && end - p < 40)
        ++end;
    return std::string(p, size_t(end - p));
}

// Why the literal at p is not an integer, quoting it (and only it).
std::string bad_number(const char *p, bool c_syntax) {
    const std::string token = token_at(p);
    const char *digits = token.c_str() + (token[0] == '-' || token[0] == '+');
    bool all_digits = *digits != '\0';
    for (const char *q = digits; *q; ++q)
        all_digits = all_digits && std::isdigit(static_cast<unsigned char>(*q));
    std::string why;
    if (all_digits)
        why = "is too large for a 64-bit integer";
    else if (token.find_first_of(".eE") != std::string::npos &&
             token.find_first_of("xX") == std::string::npos &&
             std::isdigit(static_cast<unsigned char>(*digits)))
        why = "is not an integer (products are whole numbers)";
    else
        why = c_syntax ? "is not an integer literal" : "is not a decimal integer";
    return "'" + token + "' " + why;
}

// C source: comments and preprocessor lines ignored; one declaration
// "TYPE NAME[N][N] = { ... };" whose element type bounds the values.
Entries parse_c_source(const unsigned char *data, size_t size) {
    require_text(data, size, "C source with an array 'int16_t lut[256][256] = {...};'");
    // Blank out comments and preprocessor lines, keeping offsets for line numbers.
    std::string text(reinterpret_cast<const char *>(data), size);
    for (size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 2, "//") == 0 || (text[i] == '#' && (i == 0 || text[i - 1] == '\n'))) {
            while (i < text.size() && text[i] != '\n') text[i++] = ' ';
        } else if (text.compare(i, 2, "/*") == 0) {
            const size_t close = text.find("*/", i + 2);
            const size_t stop = close == std::string::npos ? text.size() : close + 2;
            for (; i < stop; ++i)
                if (text[i] != '\n') text[i] = ' ';
            --i;
        }
    }
    const size_t eq = text.find('=');
    if (eq == std::string::npos)
        fail(APPROXMUL_ERR_FORMAT,
             "no array initializer found: expected C source like 'int16_t lut[256][256] = "
             "{...};'");
    const size_t decl_start = text.find_last_of(";}", eq) == std::string::npos
                                  ? 0
                                  : text.find_last_of(";}", eq) + 1;
    const std::string decl = text.substr(decl_start, eq - decl_start);

    struct Type { const char *name; int64_t lo, hi; };
    static const Type types[] = {
        {"int16_t", INT16_MIN, INT16_MAX}, {"uint16_t", 0, UINT16_MAX},
        {"int32_t", INT32_MIN, INT32_MAX}, {"uint32_t", 0, UINT32_MAX},
        {"short", INT16_MIN, INT16_MAX},   {"int", INT32_MIN, INT32_MAX},
    };
    Entries e;
    std::string word;
    for (size_t i = 0; i <= decl.size(); ++i) {
        const char c = i < decl.size() ? decl[i] : ' ';
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
            word += c;
            continue;
        }
        for (const Type &t : types)
            if (word == t.name && e.type == nullptr) {
                e.type = t.name;
                e.lo = t.lo;
                e.hi = t.hi;
            }
        word.clear();
    }
    if (e.type == nullptr)
        fail(APPROXMUL_ERR_FORMAT,
             "the declaration before '=' (line %d) has no integer element type: expected "
             "int16_t, uint16_t, int32_t, uint32_t, short or int",
             line_of(data, eq));
    int64_t declared = 1;
    bool has_dims = false;
    for (size_t open = decl.find('['); open != std::string::npos; open = decl.find('[', open + 1)) {
        const long long dim = std::strtoll(decl.c_str() + open + 1, nullptr, 10);
        if (dim > 0) declared *= dim, has_dims = true;
    }

    const char *p = text.c_str() + eq + 1;
    const char *const end = text.c_str() + text.size();
    int depth = 0;
    bool closed = false, need_value = true;
    while (p < end && !closed) {
        const char c = *p;
        if (std::isspace(static_cast<unsigned char>(c))) { ++p; continue; }
        if (c == '{') { ++depth; ++p; continue; }
        if (c == '}') {
            if (--depth < 0) break;
            ++p;
            continue;
        }
        if (c == ',') { need_value = true; ++p; continue; }
        if (c == ';') { closed = depth == 0; ++p; break; }
        int64_t value = 0;
        const char *at = p;
        if (!need_value)
            fail(APPROXMUL_ERR_FORMAT, "line %d: '%s' follows a value without a comma in the "
                 "initializer", line_of(data, size_t(at - text.c_str())), token_at(at).c_str());
        if (!read_integer(p, value, true))
            fail(APPROXMUL_ERR_FORMAT, "line %d: %s; expected integers between braces and "
                 "commas", line_of(data, size_t(at - text.c_str())), bad_number(at, true).c_str());
        need_value = false;
        if (value < e.lo || value > e.hi)
            fail(APPROXMUL_ERR_FORMAT, "line %d: %lld does not fit the declared element type %s",
                 line_of(data, size_t(at - text.c_str())), static_cast<long long>(value), e.type);
        e.values.push_back(value);
    }
    if (!closed)
        fail(APPROXMUL_ERR_FORMAT,
             "the initializer is not closed by '};' (truncated file?) after %zu values",
             e.values.size());
    if (has_dims && declared != int64_t(e.values.size()))
        fail(APPROXMUL_ERR_FORMAT, "the array is declared with %lld entries but has %zu values",
             static_cast<long long>(declared), e.values.size());
    return e;
}

// Text: one table row per line, integers separated by commas, spaces,
// tabs or semicolons; '#' starts a comment. The same entries as one value
// per line, or all on one line, are accepted too (the binary layout).
Entries parse_text(const unsigned char *data, size_t size, size_t &rows) {
    require_text(data, size, "text rows of integers");
    Entries e;
    const std::string text(reinterpret_cast<const char *>(data), size);
    size_t row_length = 0;
    rows = 0;
    size_t start = 0;
    for (int line = 1; start < text.size(); ++line) {
        size_t stop = text.find('\n', start);
        if (stop == std::string::npos) stop = text.size();
        std::string row = text.substr(start, stop - start);
        start = stop + 1;
        row = row.substr(0, row.find('#'));
        for (char &c : row)
            if (c == ',' || c == ';' || c == '\r' || c == '\t') c = ' ';
        const char *p = row.c_str();
        size_t count = 0;
        while (true) {
            while (*p == ' ') ++p;
            if (*p == '\0') break;
            int64_t value = 0;
            const char *at = p;
            if (!read_integer(p, value, false) || (*p != ' ' && *p != '\0'))
                fail(APPROXMUL_ERR_FORMAT, "line %d, field %zu: %s", line, count + 1,
                     bad_number(at, false).c_str());
            e.values.push_back(value);
            ++count;
        }
        if (count == 0) continue;
        if (rows > 0 && count != row_length)
            fail(APPROXMUL_ERR_FORMAT, "line %d has %zu values, the rows before it %zu", line,
                 count, row_length);
        row_length = count;
        ++rows;
    }
    const bool flat = row_length == 1 || rows == 1;  // the count decides the width
    if (rows != row_length && !flat)
        fail(APPROXMUL_ERR_FORMAT,
             "%zu rows of %zu values is not a square table (truncated file?); one value per "
             "line is accepted too", rows, row_length);
    return e;
}

int width_of_count(size_t count) {
    for (int n = 1; n <= kMaxTableBits; ++n)
        if (count == size_t{1} << (2 * n)) return n;
    return 0;
}

}  // namespace

std::vector<int32_t> parse_table(const unsigned char *data, size_t size, int format, int &bits,
                                 bool is_signed, int order) {
    if (order != APPROXMUL_ORDER_RAW && order != APPROXMUL_ORDER_TWOS &&
        order != APPROXMUL_ORDER_OFFSET)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "order: %d is not an approxmul_table_order",
             order);
    if (order != APPROXMUL_ORDER_RAW && !is_signed)
        fail(APPROXMUL_ERR_INVALID_ARGUMENT,
             "order: the %s order is defined for signed operands; unsigned tables are in raw "
             "order",
             order == APPROXMUL_ORDER_TWOS ? "twos" : "offset");
    if (bits != 0) check_width(bits, kMaxTableBits);
    // a UTF-8 byte order mark, as editors on Windows write, starts some text files
    if (format != APPROXMUL_TABLE_BINARY_U16LE && size >= 3 && data[0] == 0xEF &&
        data[1] == 0xBB && data[2] == 0xBF) {
        data += 3;
        size -= 3;
    }
    Entries e;
    size_t rows = 0;
    switch (format) {
    case APPROXMUL_TABLE_BINARY_U16LE: e = parse_binary(data, size, is_signed); break;
    case APPROXMUL_TABLE_C_SOURCE: e = parse_c_source(data, size); break;
    case APPROXMUL_TABLE_TEXT: e = parse_text(data, size, rows); break;
    default:
        fail(APPROXMUL_ERR_INVALID_ARGUMENT, "format: %d is not an approxmul_table_format",
             format);
    }
    const int found = width_of_count(e.values.size());
    if (bits == 0 && found == 0)
        fail(APPROXMUL_ERR_FORMAT,
             "%zu entries is not a full table of 4^n entries for n in 1..%d (65536 for 8 bits; "
             "truncated file?)",
             e.values.size(), kMaxTableBits);
    if (bits != 0 && found != bits)
        fail(APPROXMUL_ERR_FORMAT, "%zu entries, a %d-bit table has 4^%d = %zu (%s)",
             e.values.size(), bits, bits, size_t{1} << (2 * bits),
             e.values.size() < (size_t{1} << (2 * bits)) ? "truncated file?" : "too many");
    const int n = found;
    const int64_t lo = is_signed ? -(int64_t{1} << (2 * n - 1)) : 0;
    const int64_t hi = is_signed ? (int64_t{1} << (2 * n - 1)) - 1 : (int64_t{1} << (2 * n)) - 1;
    const size_t side = size_t{1} << n;
    const size_t flip = order == APPROXMUL_ORDER_OFFSET ? side / 2 : 0;  // value i - 2^(n-1)
    bool looks_text = format == APPROXMUL_TABLE_BINARY_U16LE && size > 0;
    for (size_t i = 0; looks_text && i < size; ++i)
        looks_text = std::isprint(data[i]) || std::isspace(data[i]);
    std::vector<int32_t> table(side * side);
    for (size_t r = 0; r < side; ++r)
        for (size_t c = 0; c < side; ++c) {
            const int64_t v = e.values[r * side + c];
            if (v < lo || v > hi)
                fail(APPROXMUL_ERR_FORMAT,
                     "entry [%zu][%zu] = %lld does not fit the %d-bit %s product range "
                     "%lld..%lld of %d-bit operands%s",
                     r, c, static_cast<long long>(v), 2 * n, is_signed ? "signed" : "unsigned",
                     static_cast<long long>(lo), static_cast<long long>(hi), n,
                     looks_text ? " (the file is all text: format 'text' or 'c'?)"
                     : (!is_signed && v < 0) ? " (a negative product: a signed table? read it "
                                               "signed, --signed or ?signed=1)"
                                             : "");
            table[((r ^ flip) << n) | (c ^ flip)] = int32_t(v);
        }
    bits = n;
    return table;
}

}  // namespace approxmul::library
