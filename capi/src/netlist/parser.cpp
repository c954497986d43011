// The structural Verilog reader: a lexer over bytes, a recursive-descent
// parser of one module's declarations, continuous assignments, gate
// primitives and (with a cell map) standard-cell instances, and the
// levelizer that turns the result into a Circuit. Every bit of every net is
// a node; an assignment gives a net bit its driver; the levelizer walks
// back from the outputs, so loops, undriven and doubly driven nets are
// found with the line that caused them. Bounded in bytes, nodes, net width
// and nesting, and free of recursion outside expression nesting.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "../core/error.hpp"
#include "netlist.hpp"

namespace approxmul::netlist {

const char *op_name(Op op) {
    switch (op) {
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Xor: return "xor";
    case Op::Nand: return "nand";
    case Op::Nor: return "nor";
    case Op::Xnor: return "xnor";
    case Op::Not: return "not";
    case Op::Mux: return "mux";
    }
    return "?";
}

namespace {

constexpr size_t kMaxBytes = size_t{64} << 20;     // netlist text
constexpr size_t kMaxCellMapBytes = size_t{1} << 20;
constexpr size_t kMaxNodes = size_t{1} << 22;      // net bits + gates
constexpr int kMaxNesting = 200;                   // parentheses, braces, unary chains
constexpr int64_t kMaxWidth = 1 << 16;             // bits of one net or constant
constexpr uint32_t kNone = 0xffffffffu;

[[noreturn]] void format_error(int line, const std::string &what) {
    fail(APPROXMUL_ERR_FORMAT, "line %d: %s", line, what.c_str());
}

[[noreturn]] void unsupported(int line, const std::string &what) {
    fail(APPROXMUL_ERR_UNSUPPORTED,
         "line %d: %s; this reader takes gate-level netlists (wires, assign with ~ & | ^, "
         "gate primitives, cells of a cell map)",
         line, what.c_str());
}

// ------------------------------------------------------------------ lexer

enum class Tok { Ident, Number, Symbol, End };

struct Token {
    Tok kind;
    std::string text;
    int line;
};

struct Lexed {
    std::vector<Token> tokens;
    std::vector<std::string> header_comments;  // "//" comments before the first token
};

bool ident_start(int c) { return std::isalpha(c) || c == '_' || c == '$'; }
bool ident_char(int c) { return std::isalnum(c) || c == '_' || c == '$'; }

// hash_comments: the cell-map syntax, where '#' starts a comment.
Lexed lex(const unsigned char *data, size_t size, bool hash_comments) {
    Lexed out;
    size_t i = 0;
    int line = 1;
    auto peek = [&](size_t k) -> int { return i + k < size ? data[i + k] : -1; };
    while (i < size) {
        const int c = data[i];
        if (c == '\n') { ++line; ++i; continue; }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') { ++i; continue; }
        if ((c == '/' && peek(1) == '/') || (hash_comments && c == '#')) {
            const size_t start = i + (c == '#' ? 1 : 2);
            while (i < size && data[i] != '\n') ++i;
            if (out.tokens.empty() && c == '/')
                out.header_comments.emplace_back(reinterpret_cast<const char *>(data) + start,
                                                 i - start);
            continue;
        }
        // block comments and attributes (* ... *): skipped up to their closing pair
        const bool comment = c == '/' && peek(1) == '*';
        if (comment || (c == '(' && peek(1) == '*' && peek(2) != ')')) {
            const int opened = line, close = comment ? '/' : ')';
            i += 2;
            while (i < size && !(data[i] == '*' && peek(1) == close)) line += data[i++] == '\n';
            if (i >= size)
                format_error(opened, comment ? "comment '/*' is not closed (truncated file?)"
                                             : "attribute '(*' is not closed (truncated file?)");
            i += 2;
            continue;
        }
        if (c == '`') {  // compiler directives: the harmless ones are skipped
            size_t j = i + 1;
            while (j < size && ident_char(data[j])) ++j;
            const std::string name(reinterpret_cast<const char *>(data) + i + 1, j - i - 1);
            if (name != "timescale" && name != "default_nettype" && name != "resetall" &&
                name != "celldefine" && name != "endcelldefine")
                unsupported(line, "compiler directive '`" + name + "'");
            while (i < size && data[i] != '\n') ++i;
            continue;
        }
        Token t{Tok::Ident, "", line};
        if (ident_start(c)) {
            const size_t start = i;
            while (i < size && ident_char(data[i])) ++i;
            t.text.assign(reinterpret_cast<const char *>(data) + start, i - start);
        } else if (c == '\\') {  // escaped identifier: up to white space
            const size_t start = ++i;
            while (i < size && data[i] > ' ' && data[i] < 127) ++i;
            if (i == start) format_error(line, "empty escaped identifier '\\'");
            t.text.assign(reinterpret_cast<const char *>(data) + start, i - start);
        } else if (std::isdigit(c) || c == '\'') {
            t.kind = Tok::Number;
            while (i < size && (std::isdigit(data[i]) || data[i] == '_')) t.text += char(data[i++]);
            size_t j = i;
            while (j < size && (data[j] == ' ' || data[j] == '\t')) ++j;
            if (j < size && data[j] == '\'') {  // based literal: size'[s]base digits
                i = j + 1;
                t.text += '\'';
                if (i < size && (data[i] == 's' || data[i] == 'S')) ++i;
                if (i < size && std::strchr("bBoOdDhH", data[i]) && data[i] != 0) {
                    t.text += char(std::tolower(data[i++]));
                } else {
                    format_error(line, "a based number needs a base b, o, d or h after the quote");
                }
                while (i < size && (data[i] == ' ' || data[i] == '\t')) ++i;
                const size_t digits = i;
                while (i < size && (std::isxdigit(data[i]) || data[i] == '_' ||
                                    std::strchr("xXzZ?", data[i]) != nullptr) && data[i] != 0)
                    t.text += char(std::tolower(data[i++]));
                if (i == digits) format_error(line, "a based number has no digits");
            }
            if (t.text.empty()) format_error(line, "stray quote");
        } else if (std::strchr("()[]{};:,.=~&|^!?#@+-*/%<>", c) != nullptr && c != 0) {
            t.kind = Tok::Symbol;
            t.text = char(c);
            static const char *pairs[] = {"~&", "~|", "~^", "^~", "&&", "||", "==", "!=",
                                          "<=", ">=", "<<", ">>", "**"};
            for (const char *p : pairs)
                if (c == p[0] && peek(1) == p[1]) t.text = p;
            i += t.text.size();
        } else {
            format_error(line, "byte 0x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                                   "0123456789abcdef"[c & 15] + " is not Verilog text");
        }
        out.tokens.push_back(std::move(t));
    }
    out.tokens.push_back({Tok::End, "end of file", line});
    return out;
}

// ------------------------------------------------------------------ graph

enum class Kind : uint8_t { Const, InputA, InputB, NetBit, Gate };

struct Node {
    Kind kind;
    Op op;
    uint32_t in[3];  // Gate: operands; NetBit: driver, net index, bit offset; Input/Const: bit
};

struct Net {
    std::string name;
    int kind = 0;  // 0 wire, 1 input, 2 output, 3 port named in the header, direction pending
    int msb = 0, lsb = 0;
    bool ranged = false;
    int line = 0;
    uint32_t first = kNone;  // node of bit offset 0
    int width() const { return std::abs(msb - lsb) + 1; }
    std::string bit_name(int offset) const {
        if (!ranged) return name;
        const int index = msb >= lsb ? lsb + offset : lsb - offset;
        return name + "[" + std::to_string(index) + "]";
    }
    std::string describe() const {
        static const char *kinds[] = {"wire", "input", "output", "port"};
        return std::string(kinds[kind]) + " " + name +
               (ranged ? "[" + std::to_string(msb) + ":" + std::to_string(lsb) + "]" : "");
    }
};

// An expression's value: one node per bit, LSB first. Unsized literals
// adapt their width to the other operand (zero-extended or cut).
struct Vec {
    std::vector<uint32_t> bits;
    bool unsized = false;
};

struct CellFunction {
    std::string pin;
    std::vector<Token> expr;  // ends with an End token
    int line;
};

struct Cell {
    std::vector<CellFunction> outputs;
    std::set<std::string> inputs;
};

using CellMap = std::map<std::string, Cell>;

class Parser {
public:
    Parser(std::vector<Token> tokens, const CellMap *cells, const char *where)
        : t_(std::move(tokens)), cells_(cells), where_(where) {
        nodes_.push_back({Kind::Const, Op::And, {0, 0, 0}});
        nodes_.push_back({Kind::Const, Op::And, {1, 0, 0}});
        line_.assign(2, 0);
    }

    // ---- token helpers
    const Token &peek(size_t k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
    const Token &next() {
        const Token &t = peek();
        if (pos_ < t_.size() - 1) ++pos_;
        return t;
    }
    bool is(const char *text, size_t k = 0) const {
        return peek(k).kind != Tok::End && peek(k).kind != Tok::Number && peek(k).text == text;
    }
    bool accept(const char *text) {
        if (!is(text)) return false;
        next();
        return true;
    }
    [[noreturn]] void unexpected(const char *expected) const {
        const Token &t = peek();
        if (t.kind == Tok::End)
            format_error(t.line, std::string("the ") + where_ + " ends where " + expected +
                                     " was expected (truncated file?)");
        if (t.kind == Tok::Symbol && std::strchr("+-*/%<>=!", t.text[0]) && t.text != "=" &&
            t.text != "!")
            unsupported(t.line, "operator '" + t.text + "' (arithmetic or comparison)");
        format_error(t.line, "'" + t.text + "' where " + expected + " was expected");
    }
    void expect(const char *text) {
        if (!accept(text)) unexpected((std::string("'") + text + "'").c_str());
    }
    std::string identifier(const char *what) {
        if (peek().kind != Tok::Ident) unexpected(what);
        return next().text;
    }
    int64_t decimal(const char *what) {
        const Token &t = peek();
        if (t.kind != Tok::Number || t.text.find('\'') != std::string::npos) {
            if (t.kind == Tok::Ident) unsupported(t.line, "'" + t.text + "' in " + what +
                                                              " (parameters)");
            unexpected(what);
        }
        int64_t value = 0;
        for (char c : t.text)
            if (c != '_' && (value = value * 10 + (c - '0')) > kMaxWidth * 4)
                format_error(t.line, std::string(what) + " " + t.text + " is too large");
        next();
        return value;
    }

    // ---- nodes
    uint32_t add(Node n, int line) {
        if (nodes_.size() >= kMaxNodes)
            fail(APPROXMUL_ERR_FORMAT,
                 "line %d: the netlist needs more than %zu nodes (net bits and gates); too "
                 "large",
                 line, kMaxNodes);
        nodes_.push_back(n);
        line_.push_back(line);
        return uint32_t(nodes_.size() - 1);
    }
    uint32_t gate(Op op, uint32_t a, uint32_t b = 0, uint32_t c = 0) {
        return add({Kind::Gate, op, {a, b, c}}, peek().line);
    }

    // ---- expressions (pins_: resolving cell-map pin names instead of nets)
    Vec expression(int depth = 0) {
        nest(depth);
        Vec condition = binary(0, depth);
        if (!accept("?")) return condition;
        const uint32_t s = reduce(condition, Op::Or);
        Vec x = expression(depth + 1);
        expect(":");
        Vec y = expression(depth + 1);
        match(x, y, "?:");
        Vec r;
        for (size_t k = 0; k < x.bits.size(); ++k) r.bits.push_back(gate(Op::Mux, s, x.bits[k], y.bits[k]));
        r.unsized = x.unsized && y.unsized;
        return r;
    }

    // Precedence levels, loosest first: || && | ^ &.
    Vec binary(int level, int depth) {
        if (level == 5) return unary(depth);
        Vec left = binary(level + 1, depth);
        while (true) {
            const std::string op = peek().kind == Tok::Symbol ? peek().text : "";
            Op gate_op;
            if (level == 0 && op == "||") gate_op = Op::Or;
            else if (level == 1 && op == "&&") gate_op = Op::And;
            else if (level == 2 && (op == "|" || op == "~|")) gate_op = op == "|" ? Op::Or : Op::Nor;
            else if (level == 3 && (op == "^" || op == "~^" || op == "^~")) gate_op = op == "^" ? Op::Xor : Op::Xnor;
            else if (level == 4 && (op == "&" || op == "~&")) gate_op = op == "&" ? Op::And : Op::Nand;
            else return left;
            next();
            Vec right = binary(level + 1, depth);
            if (level <= 1) {  // logical: each side reduced to one bit
                left = one(gate(gate_op, reduce(left, Op::Or), reduce(right, Op::Or)));
                continue;
            }
            match(left, right, op.c_str());
            for (size_t k = 0; k < left.bits.size(); ++k)
                left.bits[k] = gate(gate_op, left.bits[k], right.bits[k]);
            left.unsized = left.unsized && right.unsized;
        }
    }

    Vec unary(int depth) {
        nest(depth);
        const Token &t = peek();
        if (t.kind == Tok::Symbol) {
            const std::string op = t.text;
            if (op == "~") {
                next();
                Vec v = unary(depth + 1);
                for (uint32_t &b : v.bits) b = gate(Op::Not, b);
                return v;
            }
            if (op == "!") {
                next();
                return one(gate(Op::Not, reduce(unary(depth + 1), Op::Or)));
            }
            static const std::pair<const char *, std::pair<Op, bool>> reductions[] = {
                {"&", {Op::And, false}}, {"|", {Op::Or, false}},   {"^", {Op::Xor, false}},
                {"~&", {Op::And, true}}, {"~|", {Op::Or, true}},   {"~^", {Op::Xor, true}},
                {"^~", {Op::Xor, true}}};
            for (const auto &r : reductions)
                if (op == r.first) {
                    next();
                    uint32_t bit = reduce(unary(depth + 1), r.second.first);
                    return one(r.second.second ? gate(Op::Not, bit) : bit);
                }
        }
        return primary(depth);
    }

    Vec primary(int depth) {
        const Token &t = peek();
        if (t.kind == Tok::Number) return number(next());
        if (accept("(")) {
            Vec v = expression(depth + 1);
            expect(")");
            return v;
        }
        if (accept("{")) return concatenation(depth + 1, false);
        if (t.kind == Tok::Ident) {
            if (t.text[0] == '$') unsupported(t.line, "system function '" + t.text + "'");
            return reference(false);
        }
        unexpected("an operand (a net, a number, '(' or '{')");
    }

    // After '{': {a, b, ...} or {n{...}}; lvalue = true for assignment targets.
    Vec concatenation(int depth, bool lvalue) {
        nest(depth);
        if (!lvalue && peek().kind == Tok::Number && is("{", 1)) {
            const int line = peek().line;
            const int64_t count = decimal("a replication count");
            next();
            Vec inner = concatenation(depth + 1, false);
            expect("}");
            if (int64_t(inner.bits.size()) * count > kMaxWidth)
                format_error(line, "replication wider than " + std::to_string(kMaxWidth) + " bits");
            Vec v;
            for (int64_t r = 0; r < count; ++r) v.bits.insert(v.bits.end(), inner.bits.begin(), inner.bits.end());
            if (v.bits.empty()) format_error(line, "replication count 0");
            return v;
        }
        std::vector<Vec> parts;
        do {
            parts.push_back(lvalue ? target(depth + 1) : expression(depth + 1));
            if (parts.back().unsized)
                format_error(peek().line, "an unsized number inside a concatenation (give it a width, e.g. 1'b0)");
        } while (accept(","));
        expect("}");
        Vec v;  // the first part is the most significant
        for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
            v.bits.insert(v.bits.end(), p->bits.begin(), p->bits.end());
            if (v.bits.size() > size_t(kMaxWidth))
                format_error(peek().line, "concatenation wider than " + std::to_string(kMaxWidth) + " bits");
        }
        return v;
    }

    // An assignment target: a net, a bit or part of one, or a concatenation of those.
    Vec target(int depth = 0) {
        nest(depth);
        if (accept("{")) return concatenation(depth + 1, true);
        if (peek().kind != Tok::Ident) unexpected("a net to assign");
        return reference(true);
    }

    // name, name[i] or name[msb:lsb]
    Vec reference(bool lvalue) {
        const Token &t = next();
        const int line = t.line;
        if (pins_ != nullptr) {
            const auto pin = pins_->find(t.text);
            if (pin == pins_->end()) format_error(line, "'" + t.text + "' is no input pin of the cell");
            if (pin->second == kNone) format_error(line, "input pin '" + t.text + "' is not connected");
            return one(pin->second);
        }
        const auto found = net_index_.find(t.text);
        if (found == net_index_.end() || nets_[found->second].first == kNone)
            format_error(line, "unknown identifier '" + t.text + "' (no wire, input or output of that name is declared)");
        const Net &net = nets_[size_t(found->second)];
        int lo = 0, hi = net.width() - 1;  // bit offsets
        if (accept("[")) {
            const int64_t first = decimal("a bit index");
            int64_t second = first;
            if (accept(":")) second = decimal("a bit index");
            expect("]");
            auto offset = [&](int64_t index) {
                const int64_t o = net.msb >= net.lsb ? index - net.lsb : net.lsb - index;
                if (!net.ranged || o < 0 || o >= net.width())
                    format_error(line, "bit " + std::to_string(index) + " is outside " + net.describe() +
                                           " (declared at line " + std::to_string(net.line) + ")");
                return int(o);
            };
            lo = offset(second);
            hi = offset(first);
            if (hi < lo)
                format_error(line, "part select [" + std::to_string(first) + ":" + std::to_string(second) +
                                       "] runs against the declaration of " + net.describe());
        }
        Vec v;
        for (int o = lo; o <= hi; ++o) {
            const uint32_t node = net.first + uint32_t(o);
            if (!lvalue && use_line_[node] == 0) use_line_[node] = line;
            v.bits.push_back(node);
        }
        return v;
    }

    Vec number(const Token &t) {
        const std::string &s = t.text;
        const size_t quote = s.find('\'');
        Vec v;
        if (quote == std::string::npos) {  // plain decimal: unsized
            uint64_t value = 0;
            for (char c : s)
                if (c != '_') {
                    if (value > (uint64_t{1} << 40)) format_error(t.line, "number " + s + " is too large");
                    value = value * 10 + uint64_t(c - '0');
                }
            for (int k = 0; k < 64 && (k == 0 || value >> k); ++k) v.bits.push_back((value >> k) & 1);
            v.unsized = true;
            return v;
        }
        int64_t width = 0;
        for (size_t k = 0; k < quote; ++k)
            if (s[k] != '_' && (width = width * 10 + (s[k] - '0')) > kMaxWidth)
                format_error(t.line, "constant " + s + " is wider than " + std::to_string(kMaxWidth) + " bits");
        const char base = s[quote + 1];
        const std::string digits = s.substr(quote + 2);
        if (digits.find_first_of("xz?") != std::string::npos)
            format_error(t.line, "constant " + s + " has x or z bits; a netlist's constants are 0 or 1");
        std::vector<uint8_t> bits;  // LSB first
        if (base == 'd') {
            uint64_t value = 0;
            for (char c : digits)
                if (c != '_') {
                    if (!std::isdigit(static_cast<unsigned char>(c)) || value > (uint64_t{1} << 58))
                        format_error(t.line, "decimal constant " + s + " is malformed or too large");
                    value = value * 10 + uint64_t(c - '0');
                }
            for (int k = 0; k < 64; ++k) bits.push_back((value >> k) & 1);
        } else {
            const int per = base == 'b' ? 1 : base == 'o' ? 3 : 4;
            for (auto c = digits.rbegin(); c != digits.rend(); ++c) {
                if (*c == '_') continue;
                const int d = std::isdigit(static_cast<unsigned char>(*c)) ? *c - '0' : *c - 'a' + 10;
                if (d >= (1 << per)) format_error(t.line, "digit '" + std::string(1, *c) + "' in constant " + s);
                for (int k = 0; k < per; ++k) bits.push_back((d >> k) & 1);
                if (bits.size() > size_t(kMaxWidth) + 4) break;
            }
        }
        if (quote == 0) {  // 'b101: unsized
            while (bits.size() > 1 && bits.back() == 0) bits.pop_back();
            v.unsized = true;
            width = int64_t(bits.size());
        }
        if (width == 0) format_error(t.line, "constant " + s + " has width 0");
        for (int64_t k = 0; k < width; ++k) v.bits.push_back(size_t(k) < bits.size() ? bits[size_t(k)] : 0);
        return v;
    }

    // ---- expression helpers
    void nest(int depth) const {
        if (depth > kMaxNesting)
            format_error(peek().line, "expression nested deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    static Vec one(uint32_t bit) { return Vec{{bit}, false}; }
    uint32_t reduce(const Vec &v, Op op) {
        uint32_t r = v.bits[0];
        for (size_t k = 1; k < v.bits.size(); ++k) r = gate(op, r, v.bits[k]);
        return r;
    }
    static void resize(Vec &v, size_t width) { v.bits.resize(width, 0); }
    void match(Vec &x, Vec &y, const char *op) {
        if (x.unsized && !y.unsized) resize(x, y.bits.size());
        else if (y.unsized && !x.unsized) resize(y, x.bits.size());
        else if (x.unsized && y.unsized) resize(x.bits.size() < y.bits.size() ? x : y, std::max(x.bits.size(), y.bits.size()));
        if (x.bits.size() != y.bits.size())
            format_error(peek().line, std::string("the operands of '") + op + "' are " + std::to_string(x.bits.size()) +
                                          " and " + std::to_string(y.bits.size()) + " bits wide");
    }

    // ---- drivers
    void drive(uint32_t target_bit, uint32_t source, int line) {
        Node &n = nodes_[target_bit];
        if (n.kind != Kind::NetBit) format_error(line, "a constant cannot be assigned");
        const Net &net = nets_[n.in[1]];
        if (n.in[0] != kNone)
            format_error(line, "net '" + net.bit_name(int(n.in[2])) + "' is driven twice (first at line " +
                                   std::to_string(line_[target_bit]) + ")");
        n.in[0] = source;
        line_[target_bit] = line;
    }
    void assign(const Vec &lhs, Vec rhs, int line) {
        if (rhs.unsized) resize(rhs, lhs.bits.size());
        if (rhs.bits.size() != lhs.bits.size())
            format_error(line, "a " + std::to_string(rhs.bits.size()) + "-bit value is assigned to " +
                                   std::to_string(lhs.bits.size()) + " bits");
        for (size_t k = 0; k < lhs.bits.size(); ++k) drive(lhs.bits[k], rhs.bits[k], line);
    }

    // ---- declarations
    void declare(const std::string &name, int kind, int msb, int lsb, bool ranged, int line) {
        auto found = net_index_.find(name);
        if (found != net_index_.end()) {
            Net &net = nets_[size_t(found->second)];
            const bool same_range = net.first == kNone || (net.ranged == ranged && net.msb == msb && net.lsb == lsb);
            const bool compatible = (net.kind == 3 && kind != 0) || (net.kind != 0 && kind == 0) ||
                                    (net.kind == 0 && kind != 0 && kind != 3);
            if (!compatible)
                format_error(line, "'" + name + "' is declared twice (first at line " + std::to_string(net.line) + ")");
            if (!same_range)
                format_error(line, "'" + name + "' is redeclared with another range than " + net.describe() +
                                       " (line " + std::to_string(net.line) + ")");
            if (kind != 0) {
                if (net.kind == 3) net.line = line;  // the direction's line, not the header's
                net.kind = kind;
            }
            if (net.first == kNone && kind != 3) allocate(net, msb, lsb, ranged, line);
            return;
        }
        net_index_[name] = int(nets_.size());
        Net net;
        net.name = name;
        net.kind = kind;
        net.line = line;
        if (kind != 3) allocate(net, msb, lsb, ranged, line);
        nets_.push_back(net);
    }
    void allocate(Net &net, int msb, int lsb, bool ranged, int line) {
        net.msb = msb;
        net.lsb = lsb;
        net.ranged = ranged;
        net.first = uint32_t(nodes_.size());
        const uint32_t index = net_index_.at(net.name);
        for (int o = 0; o < net.width(); ++o) add({Kind::NetBit, Op::And, {kNone, index, uint32_t(o)}}, 0);
        use_line_.resize(nodes_.size(), 0);
        (void)line;
    }

    // [msb:lsb]
    bool range(int &msb, int &lsb) {
        if (!accept("[")) return false;
        const int line = peek().line;
        msb = int(decimal("a range bound"));
        expect(":");
        lsb = int(decimal("a range bound"));
        expect("]");
        if (std::abs(int64_t(msb) - lsb) + 1 > kMaxWidth)
            format_error(line, "a net wider than " + std::to_string(kMaxWidth) + " bits");
        return true;
    }

    // input/output/wire [signed] [range] name [= expr] {, name [= expr]}
    // ansi: inside the module header, where ", input" starts the next group.
    void declaration(bool ansi) {
        const Token &keyword = next();
        int kind = keyword.text == "input" ? 1 : keyword.text == "output" ? 2 : 0;
        if (kind != 0) accept("wire");
        if (accept("reg")) unsupported(keyword.line, "'reg' declaration");
        accept("signed");
        int msb = 0, lsb = 0;
        const bool ranged = range(msb, lsb);
        do {
            const int line = peek().line;
            const std::string name = identifier("a net name");
            if (is("[")) unsupported(line, "array (memory) declaration of '" + name + "'");
            declare(name, kind, msb, lsb, ranged, line);
            if (!ansi && accept("=")) {
                const Net &net = nets_[size_t(net_index_.at(name))];
                Vec lhs;
                for (int o = 0; o < net.width(); ++o) lhs.bits.push_back(net.first + uint32_t(o));
                Vec rhs = expression();
                if (!is(",") && !is(";")) unexpected("';'");
                assign(lhs, rhs, line);
            }
            if (ansi && is(",") && (is("input", 1) || is("output", 1) || is("inout", 1))) return;
        } while (accept(","));
        if (!ansi) expect(";");
    }

    // ---- instances
    bool primitive(const std::string &name, Op &op, bool &invert) const {
        static const std::pair<const char *, std::pair<Op, bool>> table[] = {
            {"and", {Op::And, false}}, {"or", {Op::Or, false}},   {"xor", {Op::Xor, false}},
            {"nand", {Op::And, true}}, {"nor", {Op::Or, true}},   {"xnor", {Op::Xor, true}},
            {"not", {Op::Not, true}},  {"buf", {Op::Not, false}}};
        for (const auto &p : table)
            if (name == p.first) {
                op = p.second.first;
                invert = p.second.second;
                return true;
            }
        return false;
    }

    void skip_delay() {
        if (!accept("#")) return;
        if (accept("(")) {
            int depth = 1;
            while (depth > 0 && peek().kind != Tok::End) {
                if (is("(")) ++depth;
                if (is(")")) --depth;
                next();
            }
        } else {
            next();
        }
    }

    // The one bit of v; what (and its number, if any) names it in the error.
    uint32_t single(const Vec &v, const std::string &what, int line, size_t number = 0,
                    const char *suffix = "") const {
        if (v.unsized || v.bits.size() == 1) return v.bits[0];
        format_error(line, what + suffix + (number ? " " + std::to_string(number) : "") + " is " +
                               std::to_string(v.bits.size()) + " bits wide; it must be one bit");
    }

    // and [name] (out, in, in...) {, [name] (...)} ;  not/buf: (out, ..., out, in)
    void primitive_instances(Op op, bool invert) {
        const Token &keyword = next();
        const std::string kind = keyword.text;
        if (is("(") && peek(1).kind == Tok::Ident &&
            (peek(1).text.find("strong") == 0 || peek(1).text.find("weak") == 0 ||
             peek(1).text.find("pull") == 0 || peek(1).text.find("supply") == 0 ||
             peek(1).text.find("highz") == 0))
            unsupported(keyword.line, "drive strength on a gate primitive");
        skip_delay();
        do {
            const int line = peek().line;
            if (peek().kind == Tok::Ident) {
                next();
                if (is("[")) unsupported(line, "an array of gate instances");
            }
            expect("(");
            std::vector<uint32_t> terms;
            do {
                const int term_line = peek().line;
                terms.push_back(single(expression(), kind, term_line, terms.size() + 1, " terminal"));
            } while (accept(","));
            expect(")");
            const size_t minimum = op == Op::Not ? 2 : 3;
            if (terms.size() < minimum)
                format_error(line, "a '" + kind + "' gate needs at least " + std::to_string(minimum) +
                                       " terminals, has " + std::to_string(terms.size()));
            const size_t outputs = op == Op::Not ? terms.size() - 1 : 1;
            uint32_t value;
            if (op == Op::Not) {
                value = invert ? gate(Op::Not, terms.back()) : terms.back();
            } else {
                value = terms[1];
                for (size_t k = 2; k < terms.size(); ++k) {
                    const bool last = k + 1 == terms.size();
                    const Op step = !(last && invert) ? op
                                    : op == Op::And   ? Op::Nand
                                    : op == Op::Or    ? Op::Nor
                                                      : Op::Xnor;
                    value = gate(step, value, terms[k]);
                }
            }
            for (size_t k = 0; k < outputs; ++k) {
                if (nodes_[terms[k]].kind != Kind::NetBit)
                    format_error(line, kind + " terminal " + std::to_string(k + 1) + " is an output and must be a net");
                drive(terms[k], value, line);
            }
            ++primitives_;
        } while (accept(","));
        expect(";");
    }

    // CELL [#(...)] name (.PIN(expr), ...);
    void cell_instance() {
        const Token &cell_token = next();
        const int line = cell_token.line;
        const std::string cell_name = cell_token.text;
        const auto found = cells_ ? cells_->find(cell_name) : CellMap::const_iterator();
        if (cells_ == nullptr || found == cells_->end())
            unsupported(line, "instance of '" + cell_name + "', which is no gate primitive" +
                                  (cells_ ? " and not in the cell map" : " (standard cells need a cell map)"));
        const Cell &cell = found->second;
        if (is("#")) unsupported(line, "parameters on a cell instance");
        const std::string instance = identifier("an instance name");
        expect("(");
        std::map<std::string, uint32_t> inputs;
        for (const std::string &pin : cell.inputs) inputs[pin] = kNone;
        std::map<std::string, uint32_t> outputs;
        if (!is(")")) do {
            if (!accept(".")) format_error(peek().line, "cell instances need named connections .PIN(net)");
            const int pin_line = peek().line;
            const std::string pin = identifier("a pin name");
            expect("(");
            bool is_output = false;
            for (const CellFunction &f : cell.outputs) is_output = is_output || f.pin == pin;
            if (!is_output && !cell.inputs.count(pin))
                format_error(pin_line, "cell '" + cell_name + "' has no pin '" + pin + "' in the cell map");
            if (is(")")) {
                next();
                continue;
            }
            if ((is_output ? outputs.count(pin) : inputs[pin] != kNone))
                format_error(pin_line, "pin '" + pin + "' of '" + instance + "' is connected twice");
            const Vec v = is_output ? target() : expression();
            (is_output ? outputs[pin] : inputs[pin]) = single(v, "the connection of pin " + pin, pin_line);
            expect(")");
        } while (accept(","));
        expect(")");
        expect(";");
        for (const CellFunction &f : cell.outputs) {
            const auto out = outputs.find(f.pin);
            if (out == outputs.end()) continue;
            Parser function(f.expr, nullptr, "cell map");
            function.nodes_.swap(nodes_);
            function.line_.swap(line_);
            function.pins_ = &inputs;
            uint32_t value = kNone;
            try {
                value = function.single(function.expression(), "the function of " + cell_name + "." + f.pin, f.line);
                if (function.peek().kind != Tok::End) function.unexpected("the end of the function");
            } catch (const Error &e) {  // the map was checked: a pin left open, or too large
                function.nodes_.swap(nodes_);
                function.line_.swap(line_);
                const std::string message = e.what();
                const size_t colon = message.find(": ");
                fail(e.status(), "line %d: instance '%s' of '%s': %s", line, instance.c_str(), cell_name.c_str(),
                     colon == std::string::npos ? message.c_str() : message.c_str() + colon + 2);
            }
            function.nodes_.swap(nodes_);
            function.line_.swap(line_);
            drive(out->second, value, line);
        }
        ++cell_counts_[cell_name];
    }

    // ---- module
    void module_items() {
        static const char *behavioural[] = {"reg", "always", "initial", "function", "task", "generate",
                                            "parameter", "localparam", "integer", "genvar", "specify",
                                            "defparam", "inout", "real", "time", "event", "bufif0", "bufif1",
                                            "notif0", "notif1", "tran", "pullup", "pulldown", "always_comb",
                                            "logic", "wand", "wor", "tri0", "tri1", "trireg"};
        while (!is("endmodule")) {
            const Token &t = peek();
            if (t.kind == Tok::End)
                format_error(t.line, "module '" + module_ + "' is not closed by 'endmodule' (truncated file?)");
            if (t.kind != Tok::Ident) unexpected("a declaration, 'assign', a gate or 'endmodule'");
            Op op;
            bool invert;
            if (t.text == "input" || t.text == "output" || t.text == "wire" || t.text == "tri") {
                declaration(false);
            } else if (t.text == "supply0" || t.text == "supply1") {
                const uint32_t value = t.text == "supply1" ? 1 : 0;
                next();
                do {
                    const int line = peek().line;
                    const std::string name = identifier("a net name");
                    declare(name, 0, 0, 0, false, line);
                    drive(nets_[size_t(net_index_[name])].first, value, line);
                } while (accept(","));
                expect(";");
            } else if (t.text == "assign") {
                next();
                skip_delay();
                do {
                    const int line = peek().line;
                    Vec lhs = target();
                    expect("=");
                    Vec rhs = expression();
                    if (!is(",") && !is(";")) unexpected("';'");
                    assign(lhs, rhs, line);
                    ++assigns_;
                } while (accept(","));
                expect(";");
            } else if (primitive(t.text, op, invert)) {
                primitive_instances(op, invert);
            } else if (std::find_if(std::begin(behavioural), std::end(behavioural), [&](const char *w) {
                           return t.text == w;
                       }) != std::end(behavioural)) {
                unsupported(t.line, "'" + t.text + "'");
            } else if (t.text == "module") {
                format_error(t.line, "'module' inside module '" + module_ + "' (missing 'endmodule'?)");
            } else if (peek(1).kind == Tok::Ident || is("#", 1)) {
                cell_instance();
            } else {
                unexpected("a declaration, 'assign', a gate or 'endmodule'");
            }
        }
    }

    void module_header() {
        expect("module");
        module_ = identifier("a module name");
        if (is("#")) unsupported(peek().line, "module parameters");
        if (accept("(") && !accept(")")) {
            if (is("input") || is("output") || is("inout")) {
                while (is("input") || is("output")) {
                    declaration(true);
                    if (!accept(",")) break;
                    if (!(is("input") || is("output"))) unexpected("'input' or 'output'");
                }
                if (is("inout")) unsupported(peek().line, "'inout' port");
            } else {
                do {
                    const int line = peek().line;
                    if (is(".")) unsupported(line, "named port expressions in the module header");
                    declare(identifier("a port name"), 3, 0, 0, false, line);
                } while (accept(","));
            }
            expect(")");
        }
        expect(";");
    }

    // ---- levelizing
    std::string ports_found() const {
        std::string s;
        for (const Net &n : nets_)
            if (n.kind == 1 || n.kind == 2) s += (s.empty() ? "" : ", ") + n.describe();
        return s.empty() ? "none" : s;
    }

    const Net &port(const std::string &name, int kind, const char *role, const char *option) const {
        const auto found = net_index_.find(name);
        if (found == net_index_.end() || nets_[size_t(found->second)].kind != kind)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                 "module '%s' has no %s '%s' (the %s); its ports: %s; name the ports with %s=",
                 module_.c_str(), kind == 1 ? "input" : "output", name.c_str(), role, ports_found().c_str(),
                 option);
        return nets_[size_t(found->second)];
    }

    void levelize(const Ports &ports, Netlist &out) {
        for (const Net &n : nets_)
            if (n.kind == 3 || n.first == kNone)
                fail(APPROXMUL_ERR_FORMAT, "line %d: port '%s' of module '%s' has no input or output declaration",
                     n.line, n.name.c_str(), module_.c_str());
        const Net &a = port(ports.a, 1, "first operand", "a");
        const Net &b = port(ports.b, 1, "second operand", "b");
        const Net &o = port(ports.out, 2, "product", "out");
        if (ports.a == ports.b)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "a and b name the same input '%s'", ports.a.c_str());
        for (const Net &n : nets_)
            if (n.kind == 1 && n.name != ports.a && n.name != ports.b)
                fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                     "module '%s' has the input '%s' besides the operands %s and %s; a multiplier "
                     "netlist has two operand inputs (ports: %s)",
                     module_.c_str(), n.name.c_str(), ports.a.c_str(), ports.b.c_str(), ports_found().c_str());
        if (a.width() != b.width() || a.width() > kMaxBits)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT,
                 "the operands are %s and %s: a multiplier takes two operands of the same width, "
                 "1..%d bits",
                 a.describe().c_str(), b.describe().c_str(), kMaxBits);
        if (o.width() > 62)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "the product %s is wider than 62 bits", o.describe().c_str());
        const int n = a.width();
        Circuit &c = out.circuit;
        c.a_bits = c.b_bits = n;
        for (int k = 0; k < n; ++k)
            for (int which = 0; which < 2; ++which) {
                const Net &net = which ? b : a;
                const uint32_t bit = net.first + uint32_t(k);
                if (nodes_[bit].in[0] != kNone)
                    fail(APPROXMUL_ERR_FORMAT, "line %d: input '%s' is driven inside the module", line_[bit],
                         net.bit_name(k).c_str());
                nodes_[bit].in[0] = add({which ? Kind::InputB : Kind::InputA, Op::And, {uint32_t(k), 0, 0}}, 0);
            }

        std::vector<uint8_t> state(nodes_.size(), 0);  // 0 new, 1 on the path, 2 done
        std::vector<uint32_t> signal(nodes_.size(), kNone);
        std::vector<int> depth(nodes_.size(), 0);
        std::vector<std::pair<uint32_t, int>> stack;
        auto arity = [&](const Node &node) {
            return node.kind == Kind::NetBit ? 1 : node.kind != Kind::Gate ? 0
                   : node.op == Op::Not    ? 1 : node.op == Op::Mux ? 3 : 2;
        };
        for (int k = 0; k < o.width(); ++k) {
            const uint32_t root = o.first + uint32_t(k);
            if (state[root] == 2) {
                c.outputs.push_back(signal[root]);
                continue;
            }
            stack.push_back({root, 0});
            state[root] = 1;
            while (!stack.empty()) {
                auto &[id, next_child] = stack.back();
                const Node &node = nodes_[id];
                if (node.kind == Kind::NetBit && node.in[0] == kNone) {
                    const Net &net = nets_[node.in[1]];
                    const int used = use_line_[id];
                    fail(APPROXMUL_ERR_FORMAT, "line %d: %s '%s' has no driver%s", used ? used : net.line,
                         net.kind == 2 ? "output" : "net", net.bit_name(int(node.in[2])).c_str(),
                         used ? (" (declared at line " + std::to_string(net.line) + ")").c_str() : "");
                }
                if (next_child < arity(node)) {
                    const uint32_t child = node.in[next_child++];
                    if (state[child] == 2) continue;
                    if (state[child] == 1) loop_error(stack, child);
                    state[child] = 1;
                    stack.push_back({child, 0});
                    continue;
                }
                switch (node.kind) {
                case Kind::Const: signal[id] = node.in[0]; break;
                case Kind::InputA: signal[id] = 2 + node.in[0]; break;
                case Kind::InputB: signal[id] = 2 + uint32_t(n) + node.in[0]; break;
                case Kind::NetBit: signal[id] = signal[node.in[0]]; depth[id] = depth[node.in[0]]; break;
                case Kind::Gate: {
                    Gate g{node.op, {0, 0, 0}};
                    int d = 0;
                    for (int i = 0; i < arity(node); ++i) {
                        g.in[i] = signal[node.in[i]];
                        d = std::max(d, depth[node.in[i]]);
                    }
                    depth[id] = d + 1;
                    signal[id] = c.first_gate() + uint32_t(c.gates.size());
                    c.gates.push_back(g);
                    break;
                }
                }
                state[id] = 2;
                stack.pop_back();
            }
            c.outputs.push_back(signal[root]);
            out.depth = std::max(out.depth, depth[root]);
        }
    }

    [[noreturn]] void loop_error(const std::vector<std::pair<uint32_t, int>> &stack, uint32_t child) const {
        size_t start = stack.size();
        while (start > 0 && stack[start - 1].first != child) --start;
        std::string path;
        int first_line = 0, shown = 0;
        for (size_t k = start - 1; k < stack.size(); ++k) {
            const Node &node = nodes_[stack[k].first];
            if (node.kind != Kind::NetBit) continue;
            if (first_line == 0) first_line = line_[stack[k].first];
            if (shown++ == 6) { path += " -> ..."; break; }
            path += (path.empty() ? "" : " -> ") + nets_[node.in[1]].bit_name(int(node.in[2])) + " (line " +
                    std::to_string(line_[stack[k].first]) + ")";
        }
        fail(APPROXMUL_ERR_FORMAT, "line %d: combinational loop: %s", first_line, path.c_str());
    }

    std::vector<Token> t_;
    size_t pos_ = 0;
    const CellMap *cells_;
    const char *where_;
    const std::map<std::string, uint32_t> *pins_ = nullptr;
    std::vector<Node> nodes_;
    std::vector<int> line_;      // per node: the driver's line (net bits), the creating line (gates)
    std::vector<int> use_line_;  // per node: the first line reading it (net bits)
    std::vector<Net> nets_;
    std::unordered_map<std::string, int> net_index_;
    std::string module_;
    int64_t primitives_ = 0, assigns_ = 0;
    std::map<std::string, int64_t> cell_counts_;

    friend std::shared_ptr<const Netlist> approxmul::netlist::parse(const unsigned char *, size_t, const Ports &,
                                                                    const unsigned char *, size_t);
    friend CellMap read_cell_map(const unsigned char *data, size_t size);
};

// "CELL PIN = expression" lines; '#' and '//' start comments.
CellMap read_cell_map(const unsigned char *data, size_t size) {
    if (size > kMaxCellMapBytes)
        fail(APPROXMUL_ERR_FORMAT, "the cell map has %zu bytes; at most %zu", size, kMaxCellMapBytes);
    CellMap map;
    std::vector<Token> tokens;
    try {
        tokens = lex(data, size, true).tokens;
    } catch (const Error &e) {
        fail(e.status(), "cell map %s", e.what());
    }
    size_t k = 0;
    while (tokens[k].kind != Tok::End) {
        const int line = tokens[k].line;
        auto bad = [&](const char *what) {
            fail(APPROXMUL_ERR_FORMAT, "cell map line %d: %s; expected 'CELL PIN = expression' (e.g. 'NAND2X1 Y = ~(A & B)')",
                 line, what);
        };
        if (tokens[k].kind != Tok::Ident || tokens[k + 1].kind != Tok::Ident || tokens[k + 2].text != "=" ||
            tokens[k + 2].kind != Tok::Symbol)
            bad("not a cell function");
        const std::string cell = tokens[k].text, pin = tokens[k + 1].text;
        k += 3;
        CellFunction f{pin, {}, line};
        while (tokens[k].kind != Tok::End && tokens[k].line == line && tokens[k].text != ";")
            f.expr.push_back(tokens[k++]);
        if (tokens[k].text == ";" && tokens[k].kind == Tok::Symbol) ++k;
        if (f.expr.empty()) bad("no expression");
        f.expr.push_back({Tok::End, "end of line", line});
        Cell &c = map[cell];
        for (const CellFunction &g : c.outputs)
            if (g.pin == pin) bad(("output pin '" + pin + "' of '" + cell + "' given twice").c_str());
        for (const Token &t : f.expr)
            if (t.kind == Tok::Ident) c.inputs.insert(t.text);
        // checked once here, with every pin tied to 0, so errors name the map's line
        std::map<std::string, uint32_t> pins;
        for (const Token &t : f.expr)
            if (t.kind == Tok::Ident) pins[t.text] = 0;
        Parser check(f.expr, nullptr, "cell map line");
        check.pins_ = &pins;
        try {
            check.single(check.expression(), "the function", line);
            if (check.peek().kind != Tok::End) check.unexpected("the end of the line");
        } catch (const Error &e) {
            fail(e.status(), "cell map %s", e.what());
        }
        c.outputs.push_back(std::move(f));
    }
    for (auto &[name, cell] : map)
        for (const CellFunction &f : cell.outputs)
            if (cell.inputs.count(f.pin))
                fail(APPROXMUL_ERR_FORMAT, "cell map line %d: pin '%s' of '%s' is both an output and an input",
                     f.line, f.pin.c_str(), name.c_str());
    return map;
}

std::string trim(const std::string &s) {
    const size_t first = s.find_first_not_of(" \t\r*");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

}  // namespace

std::shared_ptr<const Netlist> parse(const unsigned char *data, size_t size, const Ports &ports,
                                     const unsigned char *cell_map, size_t cell_map_size) {
    if (size > kMaxBytes)
        fail(APPROXMUL_ERR_FORMAT, "the netlist has %zu bytes; at most %zu", size, kMaxBytes);
    for (const std::string *p : {&ports.a, &ports.b, &ports.out})
        if (p->empty()) fail(APPROXMUL_ERR_INVALID_ARGUMENT, "port names must not be empty");
    CellMap cells;
    if (cell_map != nullptr) cells = read_cell_map(cell_map, cell_map_size);
    Lexed lexed = lex(data, size, false);

    // the modules in the file; the one asked for (or the only one) is read
    std::vector<std::pair<std::string, size_t>> modules;
    for (size_t k = 0; k + 1 < lexed.tokens.size(); ++k)
        if (lexed.tokens[k].kind == Tok::Ident && lexed.tokens[k].text == "module")
            modules.push_back({lexed.tokens[k + 1].text, k});
    if (modules.empty())
        fail(APPROXMUL_ERR_FORMAT, "no 'module' found: not a Verilog netlist (or an empty file)");
    std::string names;
    for (const auto &m : modules) names += (names.empty() ? "" : ", ") + m.first;
    size_t start = modules[0].second;
    if (ports.module.empty()) {
        if (modules.size() > 1)  // a hierarchy, or a library of designs
            fail(APPROXMUL_ERR_UNSUPPORTED,
                 "the file has %zu modules (%s); name the multiplier with module= (a design "
                 "whose top module instantiates the others needs Yosys to flatten it)",
                 modules.size(), names.c_str());
    } else {
        bool found = false;
        for (const auto &m : modules)
            if (m.first == ports.module) start = m.second, found = true;
        if (!found)
            fail(APPROXMUL_ERR_INVALID_ARGUMENT, "no module '%s' in the file; its modules: %s",
                 ports.module.c_str(), names.c_str());
    }
    std::vector<Token> tokens(lexed.tokens.begin() + std::ptrdiff_t(start), lexed.tokens.end());
    Parser p(std::move(tokens), cell_map != nullptr ? &cells : nullptr, "netlist");
    p.module_header();
    p.module_items();

    auto out = std::make_shared<Netlist>();
    out->module = p.module_;
    p.levelize(ports, *out);
    out->primitives = p.primitives_;
    out->assigns = p.assigns_;
    out->cells.assign(p.cell_counts_.begin(), p.cell_counts_.end());
    for (const std::string &comment : lexed.header_comments) {
        const size_t eq = comment.find('=');
        if (eq == std::string::npos) continue;
        const std::string name = trim(comment.substr(0, eq)), value = trim(comment.substr(eq + 1));
        const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_%.-/()", ch);
        });
        if (!plain || value.empty()) continue;  // NAME = value [unit] only
        out->metadata.push_back(name + "=" + value);
    }

    // the statistics, as "key=value" lines
    const Circuit &c = out->circuit;
    int64_t by_op[kOpCount] = {};
    for (const Gate &g : c.gates) ++by_op[int(g.op)];
    std::string &info = out->info;
    auto line = [&info](const std::string &key, const std::string &value) { info += key + "=" + value + "\n"; };
    const Net &a = p.nets_[size_t(p.net_index_.at(ports.a))];
    const Net &b = p.nets_[size_t(p.net_index_.at(ports.b))];
    const Net &o = p.nets_[size_t(p.net_index_.at(ports.out))];
    line("module", out->module);
    line("a", a.describe().substr(6));
    line("b", b.describe().substr(6));
    line("out", o.describe().substr(7));
    line("bits", std::to_string(c.a_bits));
    line("out_bits", std::to_string(c.outputs.size()));
    line("gates", std::to_string(c.gates.size()));
    for (int op = 0; op < kOpCount; ++op)
        if (by_op[op]) line("gates." + std::string(op_name(Op(op))), std::to_string(by_op[op]));
    line("depth", std::to_string(out->depth));
    line("assigns", std::to_string(out->assigns));
    line("primitives", std::to_string(out->primitives));
    for (const auto &[cell, count] : out->cells) line("cells." + cell, std::to_string(count));
    for (const std::string &m : out->metadata) line("meta." + m.substr(0, m.find('=')), m.substr(m.find('=') + 1));
    return out;
}

}  // namespace approxmul::netlist
