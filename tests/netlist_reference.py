"""A small, independent evaluator of structural Verilog, for the netlist tests.

It shares no code with the C reader: statements are evaluated in any order
until every net is known, each net bit a NumPy bool array over all operand
pairs (pair index a << n | b). It understands what the test netlists use:
ANSI or plain port lists, vectors, bit and part selects, replication,
concatenation, ``~ & | ^ ~^`` on bits and vectors (Python's own precedence
for these matches Verilog's), sized constants, the gate primitives and cell
instances with named pins (given a cell map {cell: {pin: expression}}).
"""

import re

import numpy as np

_TOKEN = re.compile(r"\s*(?:(\d+'[bdh][0-9a-fA-F_]+)|(\d+)|([A-Za-z_][A-Za-z0-9_$]*)|(~\^|\^~|.))")
_PRIMITIVES = {"and", "or", "nand", "nor", "xor", "xnor", "not", "buf"}


class NotReady(Exception):
    pass


def _top_level_split(text):
    """Splits 'x = a, y = {b, c}' at the commas outside braces and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "({"
        depth -= ch in ")}"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _tokens(text):
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


class Netlist:
    def __init__(self, text, cell_map=None):
        text = re.sub(r"//[^\n]*", "", text)
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        self.cells = cell_map or {}
        self.ranges = {}   # net -> (msb, lsb)
        self.inputs, self.outputs = [], []
        body = text[text.index("module"):text.index("endmodule")]
        header, _, body = body.partition(";")
        ports = header[header.index("(") + 1:header.rindex(")")]
        if re.search(r"\b(input|output)\b", ports):
            self._declare(ports.replace(",", ";").replace("; ", ";"), ansi=True)
        self.statements = []
        for statement in body.split(";"):
            statement = statement.strip()
            if not statement:
                continue
            word = statement.split()[0]
            if word in ("input", "output", "wire"):
                self._declare(statement, ansi=False)
            else:
                self.statements.append(statement)

    def _declare(self, text, ansi):
        kind, msb, lsb = None, 0, 0
        for part in re.split(r"[;,]", text) if ansi else [text]:
            m = re.match(r"\s*(input|output|wire)?\s*(?:wire\s*)?(\[\s*(\d+)\s*:\s*(\d+)\s*\])?\s*(.*)",
                         part, re.S)
            if m.group(1):
                kind = m.group(1)
                msb, lsb = (int(m.group(3)), int(m.group(4))) if m.group(2) else (0, 0)
            for name in filter(None, (n.strip() for n in m.group(5).split(","))):
                self.ranges[name] = (msb, lsb)
                if kind == "input" and name not in self.inputs:
                    self.inputs.append(name)
                if kind == "output" and name not in self.outputs:
                    self.outputs.append(name)

    def _bits(self, name):
        msb, lsb = self.ranges[name]
        step = 1 if msb >= lsb else -1
        return [f"{name}[{i}]" for i in range(lsb, msb + step, step)]

    # ---- expressions over token lists -> list of bit arrays, LSB first
    def _expr(self, toks, values):
        def primary():
            t = toks.pop(0)
            if t == "(":
                v = binary(0)
                assert toks.pop(0) == ")"
                return v
            if t == "~":
                return [~x for x in primary()]
            if t == "{":
                if re.fullmatch(r"\d+", toks[0]) and toks[1] == "{":
                    count = int(toks.pop(0))
                    toks.pop(0)
                    inner = concat()
                    assert toks.pop(0) == "}"
                    return inner * count
                return concat()
            if "'" in t:
                width, _, digits = t.partition("'")
                value = int(digits[1:].replace("_", ""), {"b": 2, "d": 10, "h": 16}[digits[0]])
                return [np.full(self.pairs, bool(value >> k & 1)) for k in range(int(width))]
            bits = self._bits(t)
            if toks and toks[0] == "[":
                toks.pop(0)
                hi = int(toks.pop(0))
                lo = hi
                if toks[0] == ":":
                    toks.pop(0)
                    lo = int(toks.pop(0))
                assert toks.pop(0) == "]"
                bits = [f"{t}[{i}]" for i in range(lo, hi + 1)]
            if any(b not in values for b in bits):
                raise NotReady
            return [values[b] for b in bits]

        def concat():
            parts = [binary(0)]
            while toks[0] == ",":
                toks.pop(0)
                parts.append(binary(0))
            assert toks.pop(0) == "}"
            return [b for part in reversed(parts) for b in part]

        ops = [("|", np.logical_or), ("^", np.logical_xor), ("&", np.logical_and)]

        def binary(level):
            if level == 3:
                return primary()
            left = binary(level + 1)
            while toks and toks[0] in (ops[level][0], "~^" if level == 1 else None):
                invert = toks.pop(0) == "~^"
                right = binary(level + 1)
                left = [ops[level][1](x, y) for x, y in zip(left, right, strict=True)]
                left = [~x for x in left] if invert else left
            return left

        return binary(0)

    def _target(self, text):
        toks = _tokens(text)
        if toks[0] == "{":
            names, parts = [], " ".join(toks[1:-1]).split(",")
            for part in reversed(parts):
                names += self._target(part)
            return names
        if len(toks) == 1:
            return self._bits(toks[0])
        lo = int(toks[-2]) if toks[3] == ":" else int(toks[2])
        return [f"{toks[0]}[{i}]" for i in range(lo, int(toks[2]) + 1)]

    def _run(self, statement, values):
        """True once the statement's outputs are in values."""
        if statement.startswith("assign"):
            for assignment in _top_level_split(statement[6:]):
                lhs, rhs = assignment.split("=", 1)
                targets = self._target(lhs)
                bits = self._expr(_tokens(rhs), values)
                assert len(bits) == len(targets), statement
                values.update(zip(targets, bits))
            return True
        word = statement.split()[0]
        inside = statement[statement.index("(") + 1:statement.rindex(")")]
        for inside in re.findall(r"\(([^()]*)\)", statement) if word in _PRIMITIVES else ():
            terms = [t.strip() for t in inside.split(",")]
            ins = [self._expr(_tokens(t), values)[0] for t in (terms[-1:] if word in ("not", "buf") else terms[1:])]
            if word in ("not", "buf"):
                value = ~ins[0] if word == "not" else ins[0]
                outs = terms[:-1]
            else:
                func = {"and": np.logical_and, "nand": np.logical_and, "or": np.logical_or,
                        "nor": np.logical_or, "xor": np.logical_xor, "xnor": np.logical_xor}[word]
                value = ins[0]
                for x in ins[1:]:
                    value = func(value, x)
                if word in ("nand", "nor", "xnor"):
                    value = ~value
                outs = terms[:1]
            for out in outs:
                values[self._target(out)[0]] = value
        if word in _PRIMITIVES:
            return True
        # cell instance: CELL NAME (.PIN(net), ...)
        pins = dict(re.findall(r"\.(\w+)\s*\(([^()]*)\)", inside))
        cell = self.cells[word]
        env = {pin: self._expr(_tokens(net), values)[0] for pin, net in pins.items() if pin not in cell}
        for pin, function in cell.items():
            if pin in pins:
                values[self._target(pins[pin])[0]] = eval(function, {}, env)  # noqa: S307 (test data)
        return True

    def table(self, a="A", b="B", out="O", signed=False):
        n = len(self._bits(a))
        self.pairs = 1 << (2 * n)
        index = np.arange(self.pairs)
        values = {}
        for k, bit in enumerate(self._bits(a)):
            values[bit] = (index >> (n + k) & 1).astype(bool)
        for k, bit in enumerate(self._bits(b)):
            values[bit] = (index >> k & 1).astype(bool)
        pending = list(self.statements)
        while pending:
            left = []
            for statement in pending:
                try:
                    self._run(statement, values)
                except NotReady:
                    left.append(statement)
            if len(left) == len(pending):
                raise ValueError(f"cannot evaluate: {left[:3]}")
            pending = left
        bits = self._bits(out)
        product = sum(values[bit].astype(np.int64) << k for k, bit in enumerate(bits))
        if signed:
            product = np.where(product >> (len(bits) - 1) & 1, product - (1 << len(bits)), product)
        return product.reshape(1 << n, 1 << n)
