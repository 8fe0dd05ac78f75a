"""Answer normalisation, the in-process fast path, and the symbolic check run by grading workers.

This module imports nothing from the project (only the standard library at import time; sympy
and math-verify lazily), so that it can run as a standalone script: the worker processes of
:class:`envs.math.grading.Grader` are ``python _grading_core.py`` speaking JSON lines on
stdin/stdout. Importing the package ``envs`` would pull in tinker and the renderers, which a
worker does not need and which would slow down its (re)start.

Nothing here may block for long in the parent: :func:`normalize_answer` and :func:`fast_compare`
use linear-time regular expressions on bounded strings and never evaluate an expression.
:func:`symbolic_equal` can hang (sympy on a power tower) and only ever runs inside a worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from decimal import Decimal
from fractions import Fraction

# --- extraction ------------------------------------------------------------------------------

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_MAX_BOX_TRIES = 8


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``, ``\\boxed 5``) in ``text``.

    Braces are matched, so ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``. Returns None when
    there is no complete box.
    """
    best: tuple[int, str] | None = None
    for command in _BOX_COMMANDS:
        start = text.rfind(command)
        tries = 0
        while start != -1 and tries < _MAX_BOX_TRIES:  # bounded: linear time on any text
            tries += 1
            found = _box_content(text, start + len(command))
            if found is not None:
                if best is None or start > best[0]:
                    best = (start, found)
                break
            start = text.rfind(command, 0, start)
    return None if best is None else best[1]


def _box_content(text: str, i: int) -> str | None:
    if i < len(text) and text[i] == " ":  # "\boxed 5": up to the next whitespace or "$"
        m = re.match(r" +([^\s$]+)", text[i:])
        return m.group(1) if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


# --- normalisation ---------------------------------------------------------------------------

_UNIT_WORDS = """
cm m km mm nm kg g mg lb lbs pound pounds ounce ounces oz inch inches in ft feet foot yard yards yd
mile miles mi meter meters metre metres second seconds sec secs s minute minutes min mins hour hours
hr hrs h day days week weeks month months year years dollar dollars cent cents degree degrees deg
unit units square sq cubic liter liters litre litres l ml gallon gallons mph kmh percent people
apples students points cookies marbles books pages times
"""
_UNITS = frozenset(_UNIT_WORDS.split())
_TEXT_COMMANDS = r"\\(?:text|textbf|textit|mbox|mathrm|mathbf|textnormal|operatorname)"
_SIMPLE_REPLACEMENTS = (
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\left", ""),
    ("\\right", ""),
    ("\\displaystyle", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", ""),
    ("\\:", ""),
    ("\\ ", " "),
    ("~", " "),
    ("\u2212", "-"),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\u00b0", ""),
    ("\\$", ""),
    ("$", ""),
    ("\\%", ""),
    ("%", ""),
    ("{,}", ","),
    ("\\dots", "..."),
    ("\\ldots", "..."),
)
_NUM = r"-?\d+(?:\.\d+)?"
_WHOLE_TEXT = re.compile(_TEXT_COMMANDS + r"\{([^{}]*)\}")
_TRAILING_TEXT = re.compile(r"^(.*?\S)\s*" + _TEXT_COMMANDS + r"\{[^{}]*\}$")
_LHS = re.compile(r"^[a-zA-Z](?:_\{?[a-zA-Z0-9]+\}?)?\s*=\s*(?!=)(.+)$")
_TRAILING_WORD = re.compile(r"^(.*?[^\sa-zA-Z\\]|.*\s)\s*([a-zA-Z]{2,}|(?<=\s)[a-zA-Z])$")
_SCIENTIFIC = re.compile(r"-?\d{1,20}(?:\.\d{1,20})?[eE][+-]?\d{1,2}")
_THOUSANDS = re.compile(r"^(-?)(\d{1,3}(?:,\d{3})+)(\.\d+)?$")
_FRAC_BRACED = re.compile(r"\\frac\{(" + _NUM + r")\}\{(" + _NUM + r")\}")
_FRAC_SHORT = re.compile(r"\\frac(\d)(\d)")
_FRAC_HALF_1 = re.compile(r"\\frac(\d)\{(\d+)\}")
_FRAC_HALF_2 = re.compile(r"\\frac\{(\d+)\}(\d)")
_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?![\d.])")
_BARE_POINT = re.compile(r"(?<![\d])\.(\d)")
_LEADING_ZEROS = re.compile(r"(?<![\d.])0+(\d)")
_CMD_SPACE = re.compile(r"(\\[a-zA-Z]+) +(?=[a-zA-Z])")
_CHOICE = re.compile(r"^\(([A-Ea-e])\)$")
_WORDS = re.compile(r"^[A-Za-z][A-Za-z ]*$")


def normalize_answer(text: str) -> str:
    """A canonical string for an answer, without evaluating anything.

    Handles: surrounding ``\\boxed{}``, ``$``, LaTeX spacing (``\\,``, ``\\!``, ``\\ ``...),
    ``\\left``/``\\right``, ``\\dfrac``/``\\tfrac``, simple fractions (``\\frac{3}{4}``,
    ``\\frac34`` -> ``3/4``), thousands separators (``1,000``, ``1{,}000``), units (``\\text{cm}``,
    trailing unit words, degrees), percent, a leading ``x =``, a leading ``+``, unicode minus,
    ``-0``, leading and trailing zeros (``2.50`` -> ``2.5``, ``3.0`` -> ``3``, ``.5`` -> ``0.5``),
    a trailing full stop, multiple-choice ``(B)`` -> ``B`` and case of plain words.
    """
    s = text.strip()
    boxed = last_boxed(s) if s.startswith(_BOX_COMMANDS) else None
    if boxed is not None:
        s = boxed.strip()
    s = s.replace("\n", " ").replace("\\\\", "\\")
    for old, new in _SIMPLE_REPLACEMENTS:
        s = s.replace(old, new)
    s = s.strip().rstrip(".").strip()
    m = _WHOLE_TEXT.fullmatch(s)
    if m:
        s = m.group(1).strip()
    m = _TRAILING_TEXT.match(s)
    if m:
        s = m.group(1)
    m = _LHS.match(s)
    if m:
        s = m.group(1).strip()
    for _ in range(3):  # "12 square feet", "10cm"
        m = _TRAILING_WORD.match(s) if len(s) <= 200 else None
        if not m or m.group(2).lower() not in _UNITS or not re.search(r"\d", m.group(1)):
            break
        s = m.group(1).strip()
    if s.startswith("+"):
        s = s[1:].lstrip()
    s = _CMD_SPACE.sub(lambda m: m.group(1) + "\x00", s)
    s = re.sub(r"\s+", "", s).replace("\x00", " ")
    if _SCIENTIFIC.fullmatch(s):
        s = format(Decimal(s), "f")
    m = _THOUSANDS.fullmatch(s)
    if m:
        s = m.group(1) + m.group(2).replace(",", "") + (m.group(3) or "")
    s = _FRAC_BRACED.sub(r"\1/\2", s)
    s = _FRAC_SHORT.sub(r"\1/\2", s)
    s = _FRAC_HALF_1.sub(r"\1/\2", s)
    s = _FRAC_HALF_2.sub(r"\1/\2", s)
    s = _BARE_POINT.sub(r"0.\1", s)
    s = _DECIMAL.sub(_trim_decimal, s)
    s = _LEADING_ZEROS.sub(r"\1", s)
    s = re.sub(r"^-(\d+)/-(\d+)$", r"\1/\2", s)
    if s in ("-0", "+0"):
        s = "0"
    m = _CHOICE.fullmatch(s)
    if m:
        s = m.group(1).upper()
    elif _WORDS.fullmatch(s):
        s = s.lower()
    return s


def _trim_decimal(m: re.Match[str]) -> str:
    frac = m.group(2).rstrip("0")
    return m.group(1) + ("." + frac if frac else "")


_PLAIN_NUMBER = re.compile(r"-?\d{1,40}(?:\.\d{1,40})?")
_PLAIN_FRACTION = re.compile(r"(-?\d{1,40})/(-?\d{1,40})")
_PLAIN_INTEGER = re.compile(r"-?\d{1,40}")


def plain_number(s: str) -> Fraction | None:
    """``s`` as an exact number when it is a bounded plain literal (``-12``, ``2.5``, ``3/4``)."""
    if _PLAIN_NUMBER.fullmatch(s):
        return Fraction(s)
    m = _PLAIN_FRACTION.fullmatch(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def fast_compare(answer: str, reference: str) -> bool | None:
    """Decide equality of two *normalised* answers without sympy, or None when it takes sympy.

    True on an exact string match or on equal plain numbers; False only for two different
    integers (no rounding question can arise); None otherwise.
    """
    if answer == reference:
        return True
    a, b = plain_number(answer), plain_number(reference)
    if a is not None and b is not None:
        if a == b:
            return True
        if _PLAIN_INTEGER.fullmatch(answer) and _PLAIN_INTEGER.fullmatch(reference):
            return False
    return None


# --- symbolic check (workers only) -----------------------------------------------------------


def _parse(expr: str):  # -> list of sympy objects (math-verify's parse result)
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return parse(f"${expr}$", extraction_config=config, parsing_timeout=None)  # type: ignore[arg-type]


def symbolic_equal(answer: str, reference: str) -> bool:
    """Symbolic equivalence via math-verify (sympy). Unbounded: run it only in a worker.

    Both sides are normalised first; when a normalised side does not parse, the raw text is
    tried. ``reference`` is math-verify's "gold" (the check is not symmetric for equations).
    """
    a_norm, r_norm = normalize_answer(answer), normalize_answer(reference)
    fast = fast_compare(a_norm, r_norm)
    if fast is not None:
        return fast
    from math_verify import verify

    gold = _parse(r_norm) or _parse(reference)
    pred = _parse(a_norm) or _parse(answer)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))  # type: ignore[arg-type]


# --- worker main loop ------------------------------------------------------------------------


_WARMUP = (("x+1", "1+x"), ("\\frac{\\sqrt{2}}{2}", "\\sqrt{0.5}"), ("\\{1,2\\}", "(1, 2]"), ("\\pi", "3.14"))


class _SoftTimeout(BaseException):
    """Raised by the worker's alarm; a BaseException so library code cannot swallow it."""


def _on_alarm(signum, frame):
    raise _SoftTimeout


def serve(memory_mb: int, nice: int = 0) -> None:
    """Worker loop: one JSON request per stdin line, one JSON reply per stdout line; EOF exits.

    Request ``{"i": id, "a": answer, "r": reference, "t": soft_timeout_s}``; reply
    ``{"i": id, "ok": bool, "s": "symbolic" | "timeout" | "error", "e": message}``. The first
    line written is ``{"ready": true}`` once the heavy imports are done.
    """
    import logging
    import resource
    import signal

    if nice > 0:
        with contextlib.suppress(OSError):
            os.nice(nice)  # the parent's event loop (and the trainer) come first
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    logging.disable(logging.WARNING)
    # Warm up before saying ready: the first LaTeX parse builds the parser (~1 s), which would
    # otherwise eat into the first real check's timeout.
    for answer, reference in _WARMUP:
        with contextlib.suppress(Exception):
            symbolic_equal(answer, reference)

    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        reply: dict[str, object] = {"i": req.get("i"), "ok": False, "s": "symbolic"}
        try:
            timeout = float(req.get("t") or 0)
            if timeout > 0:
                signal.setitimer(signal.ITIMER_REAL, timeout)
            try:
                reply["ok"] = symbolic_equal(str(req["a"]), str(req["r"]))
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _SoftTimeout:
            reply["s"] = "timeout"
        except (Exception, RecursionError, MemoryError) as e:
            reply["s"] = "error"
            reply["e"] = f"{type(e).__name__}: {e}"[:200]
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
