"""A safe arithmetic calculator for the calculator-tool environment.

No ``eval``: the expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``
(``^`` is read as power), unary signs and parentheses are allowed. Arithmetic is exact on
rationals (:class:`fractions.Fraction`) with bounded sizes: a power or product whose result
would exceed ``max_digits`` digits is refused *before* it is computed, so evaluation time is
bounded by the expression length. A non-integer power falls back to floats.
"""

from __future__ import annotations

import ast
import math
import re
import time
from fractions import Fraction

import chz

__all__ = ["CalculatorError", "CalculatorLimits", "evaluate", "format_number"]


class CalculatorError(ValueError):
    """The expression is not allowed or cannot be evaluated (a one-line reason)."""


@chz.chz
class CalculatorLimits:
    """Bounds of one evaluation."""

    max_chars: int = 200
    """Longest accepted expression."""
    max_digits: int = 400
    """Largest result magnitude, in decimal digits (numerator and denominator each)."""
    max_exponent: int = 10_000
    """Largest absolute integer exponent."""
    max_nodes: int = 200
    """Largest number of syntax-tree nodes."""
    max_seconds: float = 0.05
    """CPU-time budget of the evaluating thread, checked between operations (CPU time, not wall
    clock: a loaded machine that preempts the thread must not fail a valid expression)."""


_Number = Fraction | float
_BIN_OPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d])")


def _digits(x: int) -> int:
    return max(1, (abs(x).bit_length() * 30103) // 100000 + 1)


def _size(x: _Number) -> int:
    if isinstance(x, float):
        return 0
    return max(_digits(x.numerator), _digits(x.denominator))


class _Evaluator:
    def __init__(self, limits: CalculatorLimits):
        self.limits = limits
        self.deadline = time.thread_time() + limits.max_seconds

    def check(self, x: _Number) -> _Number:
        if isinstance(x, float):
            if not math.isfinite(x):
                raise CalculatorError("result is not a finite number")
        elif _size(x) > self.limits.max_digits:
            raise CalculatorError(f"result exceeds {self.limits.max_digits} digits")
        if time.thread_time() > self.deadline:
            raise CalculatorError("evaluation took too long")
        return x

    def eval(self, node: ast.AST) -> _Number:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise CalculatorError(f"only numbers are allowed, not {value!r}")
            return self.check(Fraction(value) if isinstance(value, int) else Fraction(repr(value)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
            x = self.eval(node.operand)
            return -x if isinstance(node.op, ast.USub) else x
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
            return self.check(self.binop(node.op, self.eval(node.left), self.eval(node.right)))
        raise CalculatorError(f"not allowed in a calculator expression: {type(node).__name__}")

    def binop(self, op: ast.operator, a: _Number, b: _Number) -> _Number:
        limit = self.limits.max_digits
        try:
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                if _size(a) + _size(b) > limit + 1:
                    raise CalculatorError(f"result exceeds {limit} digits")
                return a * b
            if isinstance(op, ast.Div):
                return a / b
            if isinstance(op, ast.FloorDiv):
                return Fraction(a // b)
            if isinstance(op, ast.Mod):
                return a % b
            return self.power(a, b)
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("result is too large") from None

    def power(self, a: _Number, b: _Number) -> _Number:
        if isinstance(b, Fraction) and b.denominator == 1 and isinstance(a, Fraction):
            n = b.numerator
            if abs(n) > self.limits.max_exponent:
                raise CalculatorError(f"exponent exceeds {self.limits.max_exponent}")
            if a == 0 and n < 0:
                raise ZeroDivisionError
            if abs(a) not in (0, 1) and _size(a) * abs(n) > self.limits.max_digits + abs(n):
                raise CalculatorError(f"result exceeds {self.limits.max_digits} digits")
            return a**n
        base, exponent = float(a), float(b)
        if base < 0:
            raise CalculatorError("fractional power of a negative number")
        if base > 1 and exponent * math.log10(base) > 300:
            raise CalculatorError("result is too large")
        return math.pow(base, exponent)


def evaluate(expression: str, limits: CalculatorLimits | None = None) -> str:
    """Evaluate an arithmetic expression and return the result as text.

    Accepts ``^`` for power, ``×``/``÷``, and thousands separators (``1,000``). Integers and
    exact fractions stay exact (``1/3`` gives ``1/3`` and its decimal value).

    Raises:
        CalculatorError: with a one-line reason for anything else (names, calls, attributes,
            strings, oversized results, division by zero, too long, too slow).
    """
    limits = limits or CalculatorLimits()
    text = expression.strip()
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > limits.max_chars:
        raise CalculatorError(f"expression longer than {limits.max_chars} characters")
    text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), text)
    text = text.replace("^", "**").replace("×", "*").replace("÷", "/").replace("\u2212", "-")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise CalculatorError(f"cannot parse {expression.strip()[:60]!r}") from None
    if sum(1 for _ in ast.walk(tree)) > limits.max_nodes:
        raise CalculatorError(f"expression has more than {limits.max_nodes} parts")
    try:
        return format_number(_Evaluator(limits).eval(tree))
    except RecursionError:
        raise CalculatorError("expression is nested too deeply") from None


def format_number(x: Fraction | float) -> str:
    """An exact integer, ``p/q (≈ decimal)`` for a fraction, or 12 significant digits for a float."""
    if isinstance(x, float):
        if x.is_integer() and abs(x) < 1e15:
            return str(int(x))
        return f"{x:.12g}"
    if x.denominator == 1:
        return str(x.numerator)
    decimal = f"{float(x):.12g}"
    if Fraction(decimal) == x:
        return decimal
    return f"{x.numerator}/{x.denominator} (≈ {decimal})"
